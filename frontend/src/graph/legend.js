// The legend under the graph: AxisType colours (Range fills; a Range is a dashed pill, so its colour never reads as
// an op group's), op-group colours, and how steps are marked. It starts folded to one button, since open it covers
// the graph's lower left on any screen (`toggle` opens and closes it).
import { h } from "../dom.js";
/** @import { Meta } from "../../types/api" */

/**
 * @param {Meta} meta
 * @param {boolean} open
 * @param {() => void} toggle
 */
export function legend(meta, open, toggle) {
  const body = h(
    "div",
    { class: "uv-legend-body" },
    h(
      "div",
      { class: "uv-legend-row" },
      h("span", { class: "uv-legend-head", title: "Range nodes are pills with a dashed edge, filled by AxisType: a colour an op group shares means the AxisType on a pill" }, "Range"),
      meta.axis_types.map((t) =>
        h("span", { class: "uv-legend-item", title: `AxisType ${t.name}` }, h("i", { class: "uv-swatch uv-swatch-pill", style: `background:${t.color}` }), `${t.letter} ${t.name}`),
      ),
    ),
    h(
      "div",
      { class: "uv-legend-row" },
      h("span", { class: "uv-legend-head" }, "Ops"),
      meta.op_groups.map((g) =>
        h("span", { class: "uv-legend-item", title: g.ops.join(" ") }, h("i", { class: "uv-swatch", style: `background:${g.color}` }), g.name),
      ),
      h("span", { class: "uv-legend-item", title: "source, codegen and symbolic ops" }, h("i", { class: "uv-swatch", style: `background:${meta.other_color}` }), "other"),
    ),
    h(
      "div",
      { class: "uv-legend-row" },
      h("span", { class: "uv-legend-head" }, "Step"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-added" }), "added"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-removed" }), "removed (beside)"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-rebuilt" }), "rebuilt ancestor"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-match" }), "matched"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-replacement" }), "replacement"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-hub" }), "shared, once per use"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-many" }), "×n: copies alike"),
      h("span", { class: "uv-legend-item" }, h("b", { class: "uv-legend-operand" }, "1"), "operand number"),
    ),
  );
  body.hidden = !open;
  return h(
    "div",
    { class: `uv-legend${open ? " uv-open" : ""}` },
    h("button", { class: "uv-button uv-legend-toggle", title: "show or hide the legend", "aria-expanded": String(open), onclick: toggle }, open ? "legend ▾" : "legend ▸"),
    body,
  );
}
