// The layout worker's request and answer (src/worker.js, src/graph/quick-layout.js, src/graph/layout.js). Only the
// type checker reads this file; it names nothing of the DOM, so the worker's check (tsconfig.worker.json) can use it.

/** The graph the layout worker is given (src/worker.js). */
export interface LayoutGraph {
  nodes: { id: string; width: number; height: number }[];
  edges: { v: string; w: string; name?: string }[];
}

/** Its answer: each node's centre and each edge's polyline [x0, y0, x1, y1, ...], in request order. */
export interface Layout {
  width: number;
  height: number;
  nodes: [number, number][];
  edges: number[][];
}

export interface LayoutSpacing {
  nodesep: number;
  ranksep: number;
  margin: number;
}
