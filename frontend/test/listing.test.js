import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { linearOf, renderListing } from "../src/graph/listing.js";
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

test("the listing: a numbered line per instruction, operands as %n (others by op), what the step did marked", () => {
  const el = document.createElement("div");
  /** @type {string[]} */
  const selected = [];
  renderListing(el, step(program, { added: ["add"], rebuilt: [["old", "st"]], removed: ["gone"] }), (op) => (op === "Add" ? "#123456" : undefined), (id) => selected.push(id), "c");
  assert.equal(el.querySelector(".uv-listing-head")?.textContent, "4 instructions · this step: +1 −1");
  const lines = [...el.querySelectorAll(".uv-line")].map((l) => [...l.children].map((c) => c.textContent).join("|"));
  assert.deepEqual(lines, ["0|Param|float32(16)||slot 0", "1|Const|index||2", "2|Add|index|%1 %1|", "3|Store|void|%0 %2 Special|"]);
  const marks = [...el.querySelectorAll(".uv-line")].map((l) => l.className);
  assert.deepEqual(marks, ["uv-line", "uv-line uv-selected", "uv-line uv-added", "uv-line uv-rebuilt"]);
  /** @type {HTMLElement} */ (el.querySelectorAll(".uv-line")[3]).click();
  assert.deepEqual(selected, ["st"]);
});
