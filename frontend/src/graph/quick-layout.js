// A fast layered layout for graphs too big for dagre to lay out while a person waits (thousands of nodes).
// The same Sugiyama phases, each in its cheapest good form: ranks by longest path, then every node pulled
// down next to its first user; long edges split by dummy nodes; the order in each rank from a depth-first walk
// from the sinks, refined by barycentre sweeps; x by least-squares placement toward the neighbours (pool
// adjacent violators per rank, so nodes keep their order and spacing). Linear in the graph per sweep.
// Input and output are those of the worker's dagre layout: nodes [{id, width, height}], edges [{v, w}]
// (v drawn above w) in; {width, height, nodes: [[x, y]], edges: [[x0, y0, x1, y1, ...]]} out.

/** @import { Layout, LayoutGraph, LayoutSpacing } from "../../types/layout" */

const SWEEPS = 4;
const PLACEMENTS = 6;

/**
 * @param {LayoutGraph} graph
 * @param {LayoutSpacing} spacing
 * @returns {Layout}
 */
export function quickLayout({ nodes, edges }, { nodesep, ranksep, margin }) {
  const n = nodes.length;
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const ends = edges.map((e) => /** @type {[number, number]} */ ([index.get(e.v), index.get(e.w)])); // an edge joins two of the nodes
  const rank = ranks(n, ends);

  // Vertices: the nodes, then one dummy per rank crossed by a long edge; each edge becomes a chain of links.
  const width = nodes.map((node) => node.width);
  const vrank = [...rank];
  /** @type {number[][]} */
  const up = Array.from({ length: n }, () => []);
  /** @type {number[][]} */
  const down = Array.from({ length: n }, () => []);
  const chains = ends.map(([v, w]) => {
    const chain = [v];
    for (let r = rank[v] + 1; r < rank[w]; r++) {
      chain.push(vrank.length);
      vrank.push(r);
      width.push(0);
      up.push([]);
      down.push([]);
    }
    chain.push(w);
    for (let i = 1; i < chain.length; i++) {
      down[chain[i - 1]].push(chain[i]);
      up[chain[i]].push(chain[i - 1]);
    }
    return chain;
  });

  const layers = order(vrank, up, down);
  const x = place(layers, up, down, width, nodesep);

  // y: each rank as tall as its tallest node, centred in it.
  /** @type {number[]} */
  const rankHeight = [];
  rank.forEach((r, i) => (rankHeight[r] = Math.max(rankHeight[r] ?? 0, nodes[i].height)));
  /** @type {number[]} */
  const rankY = [];
  let y = margin;
  for (let r = 0; r < layers.length; r++) {
    rankY.push(y + (rankHeight[r] ?? 0) / 2);
    y += (rankHeight[r] ?? 0) + ranksep;
  }
  const minX = Math.min(...x.map((cx, i) => cx - width[i] / 2));
  const shift = margin - minX;
  /** @param {number} v */
  const round = (v) => Math.round(v * 10) / 10;
  /** @param {number} i @returns {[number, number]} */
  const at = (i) => [round(x[i] + shift), round(rankY[vrank[i]])];
  return {
    width: Math.max(...x.map((cx, i) => cx + width[i] / 2)) + shift + margin,
    height: y - ranksep + margin,
    nodes: nodes.map((_, i) => at(i)),
    edges: chains.map((chain) => {
      const [v, w] = [chain[0], chain[chain.length - 1]];
      const [vx, vy] = at(v);
      const [wx, wy] = at(w);
      return [vx, round(vy + nodes[v].height / 2), ...chain.slice(1, -1).flatMap(at), wx, round(wy - nodes[w].height / 2)];
    }),
  };
}

// Longest-path ranks (sources at 0), then from the sinks back: each node as low as its highest user allows.
/**
 * @param {number} n
 * @param {[number, number][]} ends
 */
function ranks(n, ends) {
  /** @type {number[][]} */
  const succ = Array.from({ length: n }, () => []);
  const indeg = new Array(n).fill(0);
  for (const [v, w] of ends) {
    succ[v].push(w);
    indeg[w]++;
  }
  const topo = [];
  for (let i = 0; i < n; i++) if (indeg[i] === 0) topo.push(i);
  for (let i = 0; i < topo.length; i++) for (const w of succ[topo[i]]) if (--indeg[w] === 0) topo.push(w);
  if (topo.length < n) throw new Error("the graph has a cycle");
  const rank = new Array(n).fill(0);
  for (const v of topo) for (const w of succ[v]) rank[w] = Math.max(rank[w], rank[v] + 1);
  for (let i = n - 1; i >= 0; i--) {
    const v = topo[i];
    if (succ[v].length) rank[v] = Math.min(...succ[v].map((w) => rank[w])) - 1;
  }
  return rank;
}

// The vertices of each rank in order: first as a depth-first walk from the sinks through their sources meets
// them (so each subtree stays together), then by the barycentre of their neighbours, sweeping down and up.
/**
 * @param {number[]} vrank
 * @param {number[][]} up
 * @param {number[][]} down
 */
function order(vrank, up, down) {
  /** @type {number[][]} */
  const layers = [];
  for (let r = 0; r <= Math.max(...vrank); r++) layers.push([]);
  const seen = new Uint8Array(vrank.length);
  /** @param {number} root */
  const visit = (root) => {
    const stack = [root];
    while (stack.length) {
      const v = /** @type {number} */ (stack.pop());
      if (seen[v]) continue;
      seen[v] = 1;
      layers[vrank[v]].push(v);
      for (let i = up[v].length - 1; i >= 0; i--) if (!seen[up[v][i]]) stack.push(up[v][i]);
    }
  };
  for (let v = 0; v < vrank.length; v++) if (down[v].length === 0) visit(v);
  for (let v = 0; v < vrank.length; v++) visit(v);

  const pos = new Float64Array(vrank.length);
  /** @param {number[]} layer */
  const number = (layer) => layer.forEach((v, i) => (pos[v] = i));
  layers.forEach(number);
  for (let sweep = 0; sweep < SWEEPS; sweep++) {
    const downward = sweep % 2 === 0;
    const sequence = downward ? layers.slice(1) : layers.slice(0, -1).reverse();
    for (const layer of sequence) {
      const key = new Map(layer.map((v) => {
        const nb = downward ? up[v] : down[v];
        return [v, nb.length ? nb.reduce((s, u) => s + pos[u], 0) / nb.length : pos[v]];
      }));
      layer.sort((a, b) => /** @type {number} */ (key.get(a)) - /** @type {number} */ (key.get(b)) || pos[a] - pos[b]);
      number(layer);
    }
  }
  return layers;
}

// x of every vertex: each rank packed, then moved toward its neighbours' mean x, alternately above and below,
// as close as the order and the spacing allow (least squares, solved exactly per rank).
/**
 * @param {number[][]} layers
 * @param {number[][]} up
 * @param {number[][]} down
 * @param {number[]} width
 * @param {number} nodesep
 */
function place(layers, up, down, width, nodesep) {
  const x = new Float64Array(width.length);
  for (const layer of layers) {
    let cx = 0;
    for (const v of layer) {
      x[v] = cx + width[v] / 2;
      cx += width[v] + nodesep;
    }
  }
  for (let pass = 0; pass < PLACEMENTS; pass++) {
    const downward = pass % 2 === 0;
    for (const layer of downward ? layers : [...layers].reverse()) {
      const want = layer.map((v) => {
        const nb = [...(downward ? up[v] : down[v])];
        return nb.length ? nb.reduce((s, u) => s + x[u], 0) / nb.length : x[v];
      });
      const gap = layer.map((v, i) => (i ? (width[layer[i - 1]] + width[v]) / 2 + nodesep : 0));
      fitInOrder(want, gap).forEach((cx, i) => (x[layer[i]] = cx));
    }
  }
  return x;
}

// argmin Σ (x_i − want_i)² subject to x_{i+1} − x_i ≥ gap_{i+1}: with offsets c_i = Σ gap, y = x − c must be
// non-decreasing, which is isotonic regression of want − c (pool adjacent violators).
/**
 * @param {number[]} want
 * @param {number[]} gap
 */
function fitInOrder(want, gap) {
  /** @type {number[]} */
  const offset = [];
  let c = 0;
  for (let i = 0; i < want.length; i++) offset.push((c += gap[i]));
  /** @type {[number, number][]} */
  const blocks = []; // [mean, count]
  for (let i = 0; i < want.length; i++) {
    blocks.push([want[i] - offset[i], 1]);
    while (blocks.length > 1 && blocks[blocks.length - 2][0] > blocks[blocks.length - 1][0]) {
      const [m2, n2] = /** @type {[number, number]} */ (blocks.pop());
      const last = blocks[blocks.length - 1];
      last[0] = (last[0] * last[1] + m2 * n2) / (last[1] + n2);
      last[1] += n2;
    }
  }
  /** @type {number[]} */
  const out = [];
  for (const [mean, count] of blocks) for (let k = 0; k < count; k++) out.push(mean + offset[out.length]);
  return out;
}
