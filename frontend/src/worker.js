// The layout worker: layered layouts off the main thread. A request is {id, graph: {nodes: [{id, width,
// height}], edges: [{v, w, name}]}}; the answer {id, layout} or {id, error}, where layout holds each node's
// centre and each edge's polyline, in request order.
//
// dagre lays out graphs of up to DAGRE_MAX_NODES nodes and DAGRE_MAX_EDGES edges; bigger ones (an upcast kernel's
// thousands of nodes, a Linear program whose node has every instruction as a source) get quickLayout, which takes
// tens of milliseconds where dagre takes seconds to minutes.
import dagre from "@dagrejs/dagre";
import { quickLayout } from "./graph/quick-layout.js";
/** @import { Layout, LayoutGraph } from "../types/layout" */

// Network-simplex ranking gives the tidiest layers but grows much faster than linear; tight-tree is close.
const SIMPLEX_MAX_NODES = 300;
const DAGRE_MAX_NODES = 700;
const DAGRE_MAX_EDGES = 1000;
const SPACING = { nodesep: 14, ranksep: 32, margin: 24 };

/**
 * @param {LayoutGraph} graph
 * @returns {Layout}
 */
function dagreLayout({ nodes, edges }) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({
    rankdir: "TB",
    nodesep: SPACING.nodesep,
    ranksep: SPACING.ranksep,
    edgesep: 8,
    marginx: SPACING.margin,
    marginy: SPACING.margin,
    ranker: nodes.length > SIMPLEX_MAX_NODES || edges.length > 2 * SIMPLEX_MAX_NODES ? "tight-tree" : "network-simplex",
  });
  for (const n of nodes) g.setNode(n.id, { width: n.width, height: n.height });
  for (const e of edges) g.setEdge(e.v, e.w, {}, e.name);
  dagre.layout(g);
  /** @param {number} x */
  const round = (x) => Math.round(x * 10) / 10;
  return {
    width: g.graph().width,
    height: g.graph().height,
    nodes: nodes.map((n) => {
      const { x, y } = g.node(n.id);
      return [round(x), round(y)];
    }),
    edges: edges.map((e) => g.edge(e.v, e.w, e.name).points.flatMap((/** @type {{x: number, y: number}} */ p) => [round(p.x), round(p.y)])),
  };
}

/** @param {MessageEvent<{id: number, graph: LayoutGraph}>} event */
self.onmessage = ({ data: { id, graph } }) => {
  try {
    const big = graph.nodes.length > DAGRE_MAX_NODES || graph.edges.length > DAGRE_MAX_EDGES;
    const layout = big ? quickLayout(graph, SPACING) : dagreLayout(graph);
    self.postMessage({ id, layout });
  } catch (err) {
    self.postMessage({ id, error: String(err?.message ?? err) });
  }
};
