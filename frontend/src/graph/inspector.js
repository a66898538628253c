// The node inspector: the selected node's op, id, dtype, shape, arg, sources and users, over the graph; a node that
// stands for more than itself (a call of a function) links to where that is shown (`opener(node)`: {label, open}).
import { fill, h } from "../dom.js";
import { argText } from "./display.js";

export function renderInspector(el, node, table, select, opener = () => null) {
  if (!node) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  const link = (id) => {
    const n = table.get(id);
    return h("button", { class: "uv-chip", title: id, onclick: () => select(id) }, n ? `${n.op}${argText(n, table)}` : id.slice(0, 8));
  };
  const users = [...table.values()].filter((n) => n.src.includes(node.id)).map((n) => n.id);
  const target = opener(node);
  fill(
    el,
    h("div", { class: "uv-inspector-head" }, h("b", {}, node.op), h("button", { class: "uv-close", title: "close (Esc)", onclick: () => select(null) }, "×")),
    h(
      "dl",
      {},
      h("dt", {}, "id"),
      h("dd", {}, h("code", {}, node.id)),
      h("dt", {}, "dtype"),
      h("dd", {}, node.dtype ?? "—"),
      h("dt", {}, "shape"),
      h("dd", {}, node.shape ? `(${node.shape.join(", ")})` : "—"),
      h("dt", {}, "group"),
      h("dd", {}, [node.group ?? "no group", node.axis_type && ` · AxisType ${node.axis_type}`]),
      h("dt", {}, "arg"),
      h("dd", {}, h("span", { class: "uv-arg" }, node.arg || "—")),
      h("dt", {}, "src"),
      h("dd", {}, node.src.length ? node.src.map(link) : "—"),
      h("dt", {}, "users"),
      h("dd", {}, users.length ? users.map(link) : "—"),
    ),
    target && h("button", { class: "uv-open", onclick: target.open }, target.label),
  );
}
