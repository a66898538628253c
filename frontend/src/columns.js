// The sidebar's and the side panel's widths for a view `width` px wide, or null where the stylesheet's suit it (a wide
// page). Below that, each takes its share, and together at most 60% of the width: the graph keeps 40% of half a
// notebook, where fixed columns left it nothing.
/**
 * @param {number} width
 * @returns {{side: number, panel: number} | null}
 */
export function columnWidths(width) {
  if (!width || width >= 1500) return null;
  let side = Math.max(200, width * 0.17);
  let panel = Math.max(320, width * 0.3);
  const most = width * 0.6;
  if (side + panel > most) [side, panel] = [side * (most / (side + panel)), panel * (most / (side + panel))];
  return { side: Math.round(side), panel: Math.round(panel) };
}
