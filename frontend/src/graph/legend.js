// The legend under the graph: AxisType colours (Range fills), op-group colours, and how steps are marked.
import { h } from "../dom.js";

export function legend(meta) {
  return h(
    "div",
    { class: "uv-legend" },
    h(
      "div",
      { class: "uv-legend-row" },
      h("span", { class: "uv-legend-head" }, "Range"),
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
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-added" }), "added by this step"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-removed" }), "removed by it (drawn beside)"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-match" }), "matched"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-replacement" }), "replacement"),
      h("span", { class: "uv-legend-item" }, h("i", { class: "uv-swatch uv-swatch-hub" }), "shared node, drawn once per use"),
    ),
  );
}
