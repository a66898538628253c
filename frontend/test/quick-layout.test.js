import assert from "node:assert/strict";
import { test } from "node:test";
import { quickLayout } from "../src/graph/quick-layout.js";
/** @import { Layout, LayoutGraph } from "../types/layout" */

const SPACING = { nodesep: 14, ranksep: 32, margin: 24 };

/** @param {string[]} ids @param {[string, string][]} pairs @returns {LayoutGraph} */
const graph = (ids, pairs, width = 60, height = 30) => ({
  nodes: ids.map((id, i) => ({ id, width: width + (i % 3) * 10, height })),
  edges: pairs.map(([v, w]) => ({ v, w })),
});

// What every layout must be: sources above their users, no two nodes of a row overlapping, all inside the
// margins, each edge from the bottom of its source to the top of its user.
/** @param {LayoutGraph} g @param {Layout} layout */
function checkLayout(g, layout) {
  const at = new Map(g.nodes.map((n, i) => [n.id, { ...n, x: layout.nodes[i][0], y: layout.nodes[i][1] }]));
  const eps = 0.11; // positions are rounded to 0.1
  for (const n of at.values()) {
    assert.ok(n.x - n.width / 2 >= SPACING.margin - eps && n.x + n.width / 2 <= layout.width - SPACING.margin + eps, `${n.id} inside in x`);
    assert.ok(n.y - n.height / 2 >= SPACING.margin - eps && n.y + n.height / 2 <= layout.height - SPACING.margin + eps, `${n.id} inside in y`);
  }
  const nodes = [...at.values()];
  for (const a of nodes) {
    for (const b of nodes) {
      if (a.id < b.id && a.y === b.y) assert.ok(Math.abs(a.x - b.x) >= (a.width + b.width) / 2 + SPACING.nodesep - eps, `${a.id} and ${b.id} apart`);
    }
  }
  assert.equal(layout.edges.length, g.edges.length);
  g.edges.forEach((e, i) => {
    const [v, w] = [at.get(e.v), at.get(e.w)];
    assert.ok(v && w);
    assert.ok(v.y < w.y, `${e.v} above ${e.w}`);
    const p = layout.edges[i];
    assert.equal(p.length % 2, 0);
    assert.ok(Math.abs(p[0] - v.x) < eps && Math.abs(p[1] - (v.y + v.height / 2)) < eps, "from the source's bottom");
    assert.ok(Math.abs(p[p.length - 2] - w.x) < eps && Math.abs(p[p.length - 1] - (w.y - w.height / 2)) < eps, "to the user's top");
    for (let k = 3; k < p.length; k += 2) assert.ok(p[k] > p[k - 2], "edges go down");
  });
}

test("a chain is one straight column, a rank per node", () => {
  const g = graph(["a", "b", "c"], [["a", "b"], ["b", "c"]], 60);
  const layout = quickLayout({ ...g, nodes: g.nodes.map((n) => ({ ...n, width: 60 })) }, SPACING);
  assert.deepEqual(layout.nodes, [[54, 39], [54, 101], [54, 163]]);
  assert.deepEqual([layout.width, layout.height], [108, 202]);
  assert.deepEqual(layout.edges, [[54, 54, 54, 86], [54, 116, 54, 148]]);
});

test("a source is put right above its first user, and an edge over several ranks bends through each", () => {
  // s feeds only d, three ranks down from a: it sits in the rank above d, not at the top
  const g = graph(["a", "b", "c", "d", "s"], [["a", "b"], ["b", "c"], ["c", "d"], ["s", "d"], ["a", "d"]]);
  const layout = quickLayout(g, SPACING);
  checkLayout(g, layout);
  const y = (/** @type {string} */ id) => layout.nodes[g.nodes.findIndex((n) => n.id === id)][1];
  assert.equal(y("s"), y("c"));
  assert.equal(layout.edges[4].length, 2 * 4, "a -> d: its ends and a point in each of the two ranks between");
});

test("random DAGs: every layout keeps its invariants", () => {
  let seed = 3;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let round = 0; round < 40; round++) {
    const n = 2 + Math.floor(random() * 40);
    const ids = Array.from({ length: n }, (_, i) => `n${i}`);
    /** @type {[string, string][]} */
    const pairs = [];
    for (let w = 1; w < n; w++) for (let v = 0; v < w; v++) if (random() < 2.5 / n) pairs.push([ids[v], ids[w]]);
    const g = graph(ids, pairs);
    checkLayout(g, quickLayout(g, SPACING));
  }
});

test("a cycle is refused", () => {
  assert.throws(() => quickLayout(graph(["a", "b"], [["a", "b"], ["b", "a"]]), SPACING), /cycle/);
});
