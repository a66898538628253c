// Kernel names drawn as coloured axis letters: r_g33_L7_R5 shows each axis (letter and size) in its
// AxisType colour, as SPEC's AxisType table gives them (from /api/meta).
import { h } from "./dom.js";

export function kernelName(name, axisColors) {
  const [prefix, ...parts] = name.split("_");
  if (!parts.length) return h("span", { class: "uv-kname" }, name);
  return h(
    "span",
    { class: "uv-kname", title: name },
    h("span", { class: "uv-kname-prefix" }, prefix),
    parts.map((part) => {
      const m = part.match(/^([A-Za-z])(\d+)$/);
      const color = m && axisColors.get(m[1]);
      return [h("span", { class: "uv-kname-sep" }, "_"), color ? h("span", { class: "uv-kname-axis", style: `color:${color}` }, part) : part];
    }),
  );
}
