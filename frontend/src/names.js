// Kernel names drawn as coloured axis letters: r_g33_L7_R5 shows each axis (letter and size) in its
// AxisType colour, as SPEC's AxisType table gives them (from /api/meta). `label` is the name as a trace lists it,
// with " #2" where kernels share a name: the suffix is drawn after the name. A narrow column breaks a long name
// before an underscore, never inside an axis.
import { h } from "./dom.js";

/**
 * @param {string} name
 * @param {Map<string, string>} axisColors AxisType letter -> colour
 * @param {string} [label]
 */
export function kernelName(name, axisColors, label = name) {
  const suffix = label.startsWith(name) ? label.slice(name.length) : "";
  const [prefix, ...parts] = name.split("_");
  const tail = suffix && h("span", { class: "uv-kname-suffix" }, suffix);
  if (!parts.length) return h("span", { class: "uv-kname" }, name, tail);
  return h(
    "span",
    { class: "uv-kname", title: label },
    h("span", { class: "uv-kname-prefix" }, prefix),
    parts.map((part) => {
      const m = part.match(/^([A-Za-z])(\d+)$/);
      const color = m && axisColors.get(m[1]);
      return [h("wbr"), h("span", { class: "uv-kname-sep" }, "_"), color ? h("span", { class: "uv-kname-axis", style: `color:${color}` }, part) : part];
    }),
    tail,
  );
}
