// The node inspector: the selected node's op, what made it (the Tensor op and user line), id, dtype, shape, arg, sources and users, over the graph; for a drawn
// node that stands for more (copies alike, an Index with its index text) that too. A node that stands for more than
// itself in another way (a call of a function, a kernel's Call) links to where that is shown (`openers(node)`: each
// {label, open}), and
// `python(id)` (when given) shows the graph under the node as Python.
import { fill, h } from "../dom.js";
import { argText } from "./display.js";
import { originText, originTitle } from "./origin.js";
/** @import { GraphNode } from "../../types/api" */
/** @import { DisplayNode } from "../../types/ui" */

/**
 * @typedef {object} InspectorArgs
 * @property {GraphNode | "" | null | undefined} node the selected node
 * @property {DisplayNode | null | undefined} drawn the drawn node that stands for it
 * @property {Map<string, GraphNode>} table
 * @property {(id: string | null) => void} select
 * @property {(node: GraphNode) => {label: string, open: () => void}[]} [openers]
 * @property {((id: string) => void) | null} [python]
 */
/**
 * @param {HTMLElement} el
 * @param {InspectorArgs} args
 */
export function renderInspector(el, { node, drawn, table, select, openers = () => [], python = null }) {
  if (!node) {
    el.hidden = true;
    return;
  }
  el.hidden = false;
  /** @param {string} id */
  const link = (id) => {
    const n = table.get(id);
    return h("button", { class: "uv-chip", title: id, onclick: () => select(id) }, n ? `${n.op}${argText(n, table)}` : id.slice(0, 8));
  };
  const users = [...table.values()].filter((n) => n.src.includes(node.id)).map((n) => n.id);
  const copies = drawn && drawn.refs.length > 1 ? drawn.refs.length : 0;
  fill(
    el,
    h("div", { class: "uv-inspector-head" }, h("b", {}, node.op), h("button", { class: "uv-close", title: "close (Esc)", onclick: () => select(null) }, "×")),
    h(
      "dl",
      {},
      node.origin && [h("dt", {}, "origin"), h("dd", { class: "uv-origin", title: originTitle(node.origin) }, originText(node.origin))],
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
      drawn?.expr && [h("dt", {}, "index"), h("dd", {}, h("span", { class: "uv-arg uv-expr" }, drawn.expr))],
      copies > 0 && [h("dt", {}, "copies"), h("dd", {}, `drawn as one of ${copies} nodes alike but for their constants: `, /** @type {DisplayNode} */ (drawn).refs.slice(0, 16).map(link), copies > 16 && "…")],
      h("dt", {}, "src"),
      h("dd", {}, node.src.length ? node.src.map(link) : "—"),
      h("dt", {}, "users"),
      h("dd", {}, users.length ? users.map(link) : "—"),
    ),
    openers(node).map((o) => h("button", { class: "uv-open", onclick: o.open }, o.label)),
    python && h("button", { class: "uv-button uv-python", title: "Python that rebuilds the graph under this node", onclick: () => python(node.id) }, "as Python"),
  );
}
