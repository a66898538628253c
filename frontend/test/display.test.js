import assert from "node:assert/strict";
import { test } from "node:test";
import { argText, DEFAULT_OPTIONS, displayGraph, kernelsByBody, searchText } from "../src/graph/display.js";
import { node, step } from "./fixtures.js";
/** @import { DisplayGraph } from "../types/ui" */

// The drawn graph in short: each node "id: title | more lines", each edge "v -> w" with its operand after ":".
/** @param {DisplayGraph} d */
const drawn = (d) => ({
  nodes: d.nodes.map((n) => `${n.id}: ${n.lines.map((l) => l.text).join(" | ")}`).sort(),
  edges: d.edges.map((e) => `${e.v} -> ${e.w}${e.operand == null ? "" : `:${e.operand}`}${e.bridged ? " (bridged)" : ""}`).sort(),
});

// A kernel's body: out[r0] = in[r0] + 1.0, its Range shared by both Index nodes.
const kernel = [
  node("root", "Sink", ["st"], { dtype: "void" }),
  node("st", "Store", ["ix0", "val"], { dtype: "void", group: "memory" }),
  node("ix0", "Index", ["p0", "r0"], { dtype: "float32", group: "memory" }),
  node("p0", "Param", [], { arg: "slot 0 float32*", dtype: "float32" }),
  node("r0", "Range", ["c16"], { arg: "r0 LOOP", axis_type: "LOOP" }),
  node("c16", "Const", [], { arg: "16" }),
  node("val", "Add", ["ld", "one"], { dtype: "float32", group: "alu" }),
  node("ld", "Load", ["ix1"], { dtype: "float32", group: "memory" }),
  node("ix1", "Index", ["p1", "r0"], { dtype: "float32", group: "memory" }),
  node("p1", "Param", [], { arg: "slot 1 float32*", dtype: "float32" }),
  node("one", "Const", [], { arg: "1.0", dtype: "float32" }),
];
const ADD_COMMUTES = { ...DEFAULT_OPTIONS, commutative: new Set(["Add"]) };

test("every node under the root, an edge per use numbered by operand where operands are ordered", () => {
  const d = displayGraph(step(kernel), null, ADD_COMMUTES);
  assert.equal(d.total, 11);
  assert.deepEqual(drawn(d), {
    nodes: [
      "ix0: Index | float32",
      "ix1: Index | float32",
      "ld: Load | float32",
      "one: Const 1.0 | float32",
      "p0: Param slot 0 float32* | float32",
      "p1: Param slot 1 float32* | float32",
      "r0~0: Range r0 LOOP n=16",
      "r0~1: Range r0 LOOP n=16",
      "root: Sink | void",
      "st: Store | void",
      "val: Add | float32",
    ],
    // a Store's and an Index's operands are numbered; a Sink's, a commutative Add's and a one-source op's are not
    edges: ["ix0 -> st:0", "ix1 -> ld", "ld -> val", "one -> val", "p0 -> ix0:0", "p1 -> ix1:0", "r0~0 -> ix1:1", "r0~1 -> ix0:1", "st -> root", "val -> st:1"].sort(),
  });
});

test("a shared Range is drawn once per use, its constant bound in its title rather than as a node", () => {
  const d = displayGraph(step(kernel), null, ADD_COMMUTES);
  const ranges = d.nodes.filter((n) => n.ref === "r0");
  assert.deepEqual(ranges.map((n) => [n.id, n.hub, n.refs]), [["r0~0", true, ["r0"]], ["r0~1", true, ["r0"]]]);
  assert.equal(d.nodes.some((n) => n.ref === "c16"), false);
  // node boxes fit their longest line (6.7 px a character and 8 px padding each side) and their lines
  assert.deepEqual([ranges[0].width, ranges[0].height], [Math.ceil("Range r0 LOOP n=16".length * 6.7 + 16), 9 + 13]);
});

test("index folding: the Index arithmetic is text on the Load and Store that use it", () => {
  const d = displayGraph(step(kernel), null, { ...ADD_COMMUTES, index: true });
  assert.deepEqual(drawn(d), {
    nodes: ["ld: Load | p1[r0] | float32", "one: Const 1.0 | float32", "root: Sink | void", "st: Store | p0[r0] | void", "val: Add | float32"],
    edges: ["ld -> val", "one -> val", "st -> root", "val -> st:1"],
  });
  assert.equal(d.nodes.find((n) => n.id === "st")?.expr, "p0[r0]");
});

/** A Load through an Index of `index` (the nodes after it), under a Sink. @param {string[]} index @param {import("../types/api").GraphNode[]} more */
const loadThrough = (index, more) => [
  node("root", "Sink", ["ld"], { dtype: "void" }),
  node("ld", "Load", ["ix"], { dtype: "float32" }),
  node("ix", "Index", ["p", ...index], { dtype: "float32" }),
  node("p", "Param", [], { arg: "slot 3 float*" }),
  node("r0", "Range", ["c8"], { arg: "r0 GLOBAL" }),
  node("r1", "Range", ["c8"], { arg: "r1 LOOP" }),
  node("c8", "Const", [], { arg: "8" }),
  node("c4", "Const", [], { arg: "4" }),
  ...more,
];
/** @param {import("../types/api").GraphNode[]} nodes */
const loadText = (nodes) => displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, index: true }).nodes.find((n) => n.id === "ld")?.expr;

test("index text: precedence decides the parentheses; a bool last operand is the gate", () => {
  assert.equal(loadText(loadThrough(["add"], [node("mul", "Mul", ["r0", "c4"]), node("add", "Add", ["mul", "r1"])])), "p3[r0*4 + r1]");
  assert.equal(loadText(loadThrough(["mul"], [node("add", "Add", ["r0", "r1"]), node("mul", "Mul", ["add", "c4"])])), "p3[(r0 + r1)*4]");
  assert.equal(loadText(loadThrough(["sub"], [node("sub", "Sub", ["r0", "add"]), node("add", "Add", ["r1", "c4"])])), "p3[r0 - (r1 + 4)]");
  assert.equal(loadText(loadThrough(["r0", "lt"], [node("lt", "CmpLt", ["r1", "c4"], { dtype: "bool" })])), "p3[r0] if r1 < 4");
  assert.equal(loadText(loadThrough(["r0", "r1"], [])), "p3[r0, r1]");
});

test("float arithmetic is no index arithmetic: such an Index stays a graph", () => {
  const nodes = loadThrough(["f"], [node("f", "Add", ["r0", "c4"], { dtype: "float32" })]);
  assert.equal(loadText(nodes), null);
  assert.ok(displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, index: true }).nodes.some((n) => n.id === "ix"));
});

test("copies alike but for their constants are drawn once, with their count and the constants' range", () => {
  const nodes = [
    node("root", "Sink", ["a1", "a2", "a3"]),
    node("a1", "Neg", ["c1"]),
    node("a2", "Neg", ["c2"]),
    node("a3", "Neg", ["c3"]),
    node("c1", "Const", [], { arg: "1" }),
    node("c2", "Const", [], { arg: "2" }),
    node("c3", "Const", [], { arg: "7" }),
  ];
  const d = displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, lanes: true });
  assert.deepEqual(
    d.nodes.map((n) => [n.lines[0].text, [...n.refs].sort()]),
    [
      ["Sink", ["root"]],
      ["Neg ×3", ["a1", "a2", "a3"]],
      ["Const 1‥7 ×3", ["c1", "c2", "c3"]],
    ],
  );
  assert.deepEqual(
    d.edges.map((e) => [e.name, e.operand]),
    [
      ["0,1,2", null], // the Sink uses the group at operands 0..2; a Sink's operands are unordered
      ["0", null],
    ],
  );
  // without the view, each is its own node
  assert.equal(displayGraph(step(nodes)).nodes.length, 7);
});

test("hidden op groups: their users are wired to their visible sources by bridged edges", () => {
  const d = displayGraph(step(kernel), null, { ...ADD_COMMUTES, hidden: new Set(["memory"]) });
  assert.deepEqual(drawn(d).edges, ["one -> val", "p0 -> root (bridged)", "p1 -> val (bridged)", "r0~0 -> root (bridged)", "r0~1 -> val (bridged)", "val -> root (bridged)"]);
  assert.equal(d.nodes.some((n) => n.group === "memory"), false);
});

test("what a step added, removed (drawn beside) and matched is marked on nodes and edges", () => {
  const removed = new Map([["old", node("old", "Mul", ["x", "x"])]]);
  const st = step([node("root", "Sink", ["new"]), node("new", "Add", ["x", "x"]), node("x", "DefineVar", [], { arg: "n 1 9" })], { added: ["new"], removed: ["old"], match: "old", replacement: "new" });
  const d = displayGraph(st, removed);
  assert.deepEqual(d.nodes.map((n) => [n.id, n.status]), [["root", null], ["old", "removed"], ["new", "added"], ["x~0", null], ["x~1", null]]);
  assert.deepEqual(d.edges.map((e) => [e.v, e.w, e.operand, e.status]), [["new", "root", null, "added"], ["x~0", "old", "0‥1", "removed"], ["x~1", "new", "0‥1", "added"]]);
  assert.equal(d.key, "root|old|false|false|false|");
  // without the removed nodes, the graph is the step's own
  assert.deepEqual(displayGraph(st).nodes.map((n) => n.id), ["root", "new", "x"]);
});

test("a node of more than 64 sources keeps their edges for the layout but does not draw them", () => {
  const items = Array.from({ length: 70 }, (_, i) => node(`i${i}`, "Neg"));
  const d = displayGraph(step([node("lin", "Linear", items.map((n) => n.id)), ...items]));
  assert.equal(d.edges.length, 70);
  assert.ok(d.edges.every((e) => e.hidden));
  assert.deepEqual(d.nodes.find((n) => n.id === "lin")?.lines.map((l) => l.text), ["Linear", "index ← 70 src"]);
});

test("argText: a Range's constant bound, and long args clipped", () => {
  const table = new Map([["c", node("c", "Const", [], { arg: "1024" })]]);
  assert.equal(argText(node("r", "Range", ["c"], { arg: "r12 LOOP" }), table), " r12 LOOP n=1024");
  assert.equal(argText(node("r", "Range", ["v"], { arg: "r12 LOOP" }), table), " r12 LOOP");
  assert.equal(argText(node("x", "Custom", [], { arg: "a".repeat(40) }), table), ` ${"a".repeat(28)}…`);
  assert.equal(argText(node("x", "Neg"), table), "");
});

test("searchText: op, lines, index text and ids, in lower case", () => {
  const d = displayGraph(step(kernel), null, { ...ADD_COMMUTES, index: true });
  const st = d.nodes.find((n) => n.id === "st");
  assert.ok(st);
  assert.equal(searchText(st), "store store p0[r0] void p0[r0] st");
});

test("calls: a schedule's Call is one box over its buffers, its kernel's body counted on it, not drawn", () => {
  const nodes = [
    node("sink", "Sink", ["call"]),
    node("call", "Call", ["body", "buf", "after"]),
    node("body", "Sink", ["store"]),
    node("store", "Store", ["p0", "val"]),
    node("val", "Add", ["p0", "p0"]),
    node("p0", "Param"),
    node("buf", "Buffer"),
    node("after", "After", ["buf"]),
  ];
  const grouped = displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, calls: true });
  assert.deepEqual(grouped.nodes.map((n) => n.id).sort(), ["after", "buf~0", "buf~1", "call", "sink"]);
  assert.equal(grouped.nodes.find((n) => n.id === "call")?.expr, "kernel of 4 nodes");
  const whole = displayGraph(step(nodes), null, DEFAULT_OPTIONS);
  assert.ok(["body", "store", "val"].every((id) => whole.nodes.some((n) => n.id === id)));
  assert.notEqual(grouped.key, whole.key);
});

test("calls: an expanded Call draws its kernel's body under it; the others stay boxes", () => {
  const nodes = [
    node("sink", "Sink", ["c1", "c2"]),
    node("c1", "Call", ["b1", "buf"]),
    node("c2", "Call", ["b2", "buf"]),
    node("b1", "Sink", ["s1"]),
    node("s1", "Store", ["p0", "p0"]),
    node("b2", "Sink", ["s2"]),
    node("s2", "Store", ["p1", "p1"]),
    node("p0", "Param"),
    node("p1", "Param", [], { arg: "1" }),
    node("buf", "Buffer"),
  ];
  const folded = displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, calls: true });
  const one = displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, calls: true, expanded: new Set(["c1"]) });
  const ids = (/** @type {import("../types/ui").DisplayGraph} */ d) => d.nodes.map((n) => n.id.split("~")[0]);
  assert.ok(!ids(folded).includes("b1") && !ids(folded).includes("b2"));
  assert.ok(["b1", "s1", "p0"].every((id) => ids(one).includes(id)));
  assert.ok(!ids(one).includes("b2") && !ids(one).includes("s2"));
  assert.equal(one.nodes.find((n) => n.id === "c1")?.expr, null);
  assert.equal(one.nodes.find((n) => n.id === "c2")?.expr, "kernel of 3 nodes");
  const e4 = /** @type {import("../types/api").ContextInfo} */ ({ index: 3, kind: "kernel", kernel_hash: "b2", label: "E_4" });
  const named = displayGraph(step(nodes), null, { ...DEFAULT_OPTIONS, calls: true, kernels: new Map([["b2", e4]]) });
  assert.deepEqual(named.nodes.filter((n) => n.op === "Call").map((n) => n.lines[0].text).sort(), ["Call", "Call E_4"]);
  assert.notEqual(named.key, folded.key); // a name widens its box
  assert.ok(one.edges.some((e) => e.v === "b1" && e.w === "c1" && e.operand === "0"));
  assert.notEqual(one.key, folded.key);
});

test("kernelsByBody: each kernel context's first graph names its kernel, the first context of a body wins", () => {
  const ctx = (/** @type {number} */ index, /** @type {string} */ kind, /** @type {string | null} */ hash, /** @type {string} */ label) => /** @type {import("../types/api").ContextInfo} */ ({ index, kind, kernel_hash: hash, label });
  const names = kernelsByBody([ctx(0, "schedule", null, "schedule"), ctx(1, "kernel", "aa", "E_4"), ctx(2, "kernel", "bb", "r_8 #1"), ctx(3, "kernel", "bb", "r_8 #2"), ctx(4, "kernel", null, "failed")]);
  assert.deepEqual([...names].map(([body, c]) => [body, c.label, c.index]), [["aa", "E_4", 1], ["bb", "r_8 #1", 2]]);
});
