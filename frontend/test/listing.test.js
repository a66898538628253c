import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { foldRepeats, linearOf, listingDiff, listingLines, renderListing, runsOfAlike } from "../src/graph/listing.js";
import { node, step } from "./fixtures.js";

const program = [
  node("lin", "Linear", ["p", "c", "add", "st"], { dtype: "void" }),
  node("p", "Param", [], { arg: "slot 0", dtype: "float32", shape: [16] }),
  node("c", "Const", [], { arg: "2" }),
  node("add", "Add", ["c", "c"]),
  node("st", "Store", ["p", "add", "outside"], { dtype: "void" }),
  node("outside", "Special", [], { arg: "gidx0" }),
];

test("linearOf finds the Linear program at the root, or under a Program", () => {
  assert.equal(linearOf(step(program))?.linear.id, "lin");
  assert.equal(linearOf(step([node("prog", "Program", ["lin"]), ...program]))?.linear.id, "lin");
  assert.equal(linearOf(step([node("sink", "Sink", ["lin"]), ...program])), null);
  assert.equal(linearOf({ nodes: [] }), null);
});

test("the listing: a numbered line per instruction, constants written where used, operands as %n, marks", () => {
  const el = document.createElement("div");
  /** @type {string[]} */
  const selected = [];
  renderListing(el, step(program, { added: ["add"], rebuilt: [["old", "st"]], removed: ["gone"] }), (op) => (op === "Add" ? "#123456" : undefined), (id) => selected.push(id), "add");
  assert.equal(el.querySelector(".uv-listing-head")?.textContent, "4 instructions · 1 constants written where they are used · this step: +1 −1");
  const lines = [...el.querySelectorAll(".uv-line")].map((l) => [...l.children].map((c) => c.textContent).join("|"));
  assert.deepEqual(lines, ["0|Param|float32(16)||slot 0", "2|Add|index|2 2|", "3|Store|void|%0 %2 Special|"]);
  const marks = [...el.querySelectorAll(".uv-line")].map((l) => l.className);
  assert.deepEqual(marks, ["uv-line", "uv-line uv-added uv-selected", "uv-line uv-rebuilt"]);
  /** @type {HTMLElement} */ (el.querySelectorAll(".uv-line")[2]).click();
  assert.deepEqual(selected, ["st"]);
});

test("loops indent what they hold: a Range opens one, its End closes it", () => {
  const loops = [
    node("lin", "Linear", ["r0", "r1", "ld", "e1", "st", "e0"], { dtype: "void" }),
    node("r0", "Range", ["n"], { arg: "r0 LOOP" }),
    node("n", "Const", [], { arg: "4" }),
    node("r1", "Range", ["n"], { arg: "r1 REDUCE" }),
    node("ld", "Load", ["r1"]),
    node("e1", "End", ["ld", "r1"]),
    node("st", "Store", ["r0", "e1"]),
    node("e0", "End", ["st", "r0"]),
  ];
  const got = listingLines(loops[0], new Map(loops.map((n) => [n.id, n])));
  assert.deepEqual(got.map((l) => [l.node.op, l.depth, l.operands.join(" ")]), [
    ["Range", 0, "4"],
    ["Range", 1, "4"],
    ["Load", 2, "%1"],
    ["End", 1, "%2 %1"],
    ["Store", 1, "%0 %3"],
    ["End", 0, "%4 %0"],
  ]);
});

test("listingDiff: lines by node identity, so an inserted instruction is one + line, not a renumbered program", () => {
  const before = step([node("lin0", "Linear", ["p", "add", "st0"], { dtype: "void" }), ...program.slice(1, 4), node("st0", "Store", ["p", "add"], { dtype: "void" })]);
  const after = step([node("lin", "Linear", ["p", "r", "add", "st"], { dtype: "void" }), node("r", "Range", ["c"], { arg: "LOOP" }), ...program.slice(1, 4), node("st", "Store", ["p", "add", "r"], { dtype: "void" })], { added: ["r", "st"], rebuilt: [["lin0", "lin"]], changes: [{ kind: "changed", id: "st", before: "st0", text: "", before_text: "" }] });
  const diff = listingDiff(before, after).split("\n");
  assert.deepEqual(diff.filter((l) => /^[-+][^-+]/.test(l)), ["+Range  index  2  LOOP", "-Add  index  2 2", "+  Add  index  2 2", "-Store  void  %0 %1", "+  Store  void  %0 %2 %1"]); // in the loop now
  assert.ok(diff.includes(" Param  float32(16)  slot 0"));
  const first = listingDiff({ nodes: [node("sink", "Sink", ["st"])], root: "sink" }, step(program)).split("\n");
  assert.equal(first.filter((l) => /^\+[^+]/.test(l)).length, 3); // a graph made linear: every line is new
  assert.equal(listingDiff(step(program), step(program)), "");
});

test("alike declarations in a row are one line that opens to them; a selected one opens its run", () => {
  const regs = ["r0", "r1", "r2", "r3"];
  const nodes = [
    node("lin", "Linear", ["p", ...regs, "st"], { dtype: "void" }),
    node("p", "Param", [], { arg: "slot 0", dtype: "float32", shape: [16] }),
    ...regs.map((id) => node(id, "Buffer", [], { arg: "float32[16] CPU REG", dtype: "float32", shape: [16] })),
    node("st", "Store", ["p", "r0"], { dtype: "void" }),
  ];
  const runs = runsOfAlike(listingLines(nodes[0], new Map(nodes.map((n) => [n.id, n]))));
  assert.deepEqual(runs.map((r) => r.map((l) => l.id)), [["p"], regs, ["st"]]);
  const el = document.createElement("div");
  renderListing(el, step(nodes), () => undefined, () => {}, null);
  const run = /** @type {HTMLDetailsElement} */ (el.querySelector("details.uv-line-run"));
  assert.equal(run.querySelector("summary .uv-line-src")?.textContent, "×4 alike: %1‥%4");
  assert.equal(run.querySelectorAll(":scope > .uv-line").length, 4);
  assert.equal(run.open, false);
  renderListing(el, step(nodes), () => undefined, () => {}, "r2");
  assert.equal(/** @type {HTMLDetailsElement} */ (el.querySelector("details.uv-line-run")).open, true);
});

test("foldRepeats: alike diff lines in a row said once with their count; two stay two", () => {
  /** @type {import("../src/text-diff.js").Op[]} */
  const ops = [["+", "Buffer  float32(16)"], ["+", "Buffer  float32(16)"], ["+", "Buffer  float32(16)"], [" ", "Add"], [" ", "Add"], ["-", "Buffer  float32(16)"]];
  assert.deepEqual(foldRepeats(ops), [["+", "Buffer  float32(16)  ×3"], [" ", "Add"], [" ", "Add"], ["-", "Buffer  float32(16)"]]);
});
