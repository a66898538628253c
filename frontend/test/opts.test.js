import assert from "node:assert/strict";
import { test } from "node:test";
import { choiceOf, choicesFor, describeOpt, describeOpts, formatOpts, makeOpt, parseOpts } from "../src/opts.js";
import { META } from "./fixtures.js";

/** @param {string} label */
const choice = (label) => {
  const c = META.opts.find((o) => o.label === label);
  assert.ok(c, label);
  return c;
};
const labels = (/** @type {import("../types/api").OptChoice[]} */ choices) => choices.map((c) => c.label);

test("the choices a device takes, in meta's order", () => {
  assert.deepEqual(labels(choicesFor(META, "CPU")), ["UPCAST", "UNROLL", "PADTO", "SWAP", "NOLOCALS"]);
  assert.deepEqual(labels(choicesFor(META, "CL")), ["UPCAST", "LOCAL", "UNROLL", "PADTO", "SWAP", "NOLOCALS"]);
});

test("a device this server does not run gets what every device here takes", () => {
  assert.deepEqual(labels(choicesFor(META, "METAL")), ["UPCAST", "UNROLL", "PADTO", "SWAP", "NOLOCALS"]);
  assert.deepEqual(labels(choicesFor(META, null)), ["UPCAST", "UNROLL", "PADTO", "SWAP", "NOLOCALS"]);
  // with no device list at all, every choice
  assert.equal(choicesFor({ ...META, device_opts: {} }, "CPU").length, META.opts.length);
});

test("makeOpt builds each kind of opt from the form", () => {
  const form = { axis: 2, amount: 4, top: true, other: 0 };
  assert.deepEqual(makeOpt(choice("UPCAST"), form), { op: "SPLIT", axis: 2, arg: [4, "UPCAST", true] });
  assert.deepEqual(makeOpt(choice("LOCAL"), { ...form, top: false }), { op: "SPLIT", axis: 2, arg: [4, "LOCAL", false] });
  assert.deepEqual(makeOpt(choice("PADTO"), form), { op: "PADTO", axis: 2, arg: 4 });
  assert.deepEqual(makeOpt(choice("SWAP"), form), { op: "SWAP", axis: 2, arg: 0 });
  assert.deepEqual(makeOpt(choice("NOLOCALS"), form), { op: "NOLOCALS", axis: null, arg: null });
});

test("choiceOf tells SPLITs apart by the AxisType they split to", () => {
  assert.equal(choiceOf(META, { op: "SPLIT", axis: 0, arg: [4, "LOCAL", false] })?.label, "LOCAL");
  assert.equal(choiceOf(META, { op: "SPLIT", axis: 0, arg: [4, "UNROLL", false] })?.label, "UNROLL");
  assert.equal(choiceOf(META, { op: "SPLIT", axis: 0, arg: [4, "THREAD", false] }), undefined);
  assert.equal(choiceOf(META, { op: "PADTO", axis: 1, arg: 32 })?.label, "PADTO");
});

test("describeOpt: short text per kind, and a raw one for an opt no choice makes", () => {
  assert.equal(describeOpt(META, { op: "SPLIT", axis: 1, arg: [4, "UPCAST", true] }), "UPCAST a1 ×4 top");
  assert.equal(describeOpt(META, { op: "SPLIT", axis: 0, arg: [16, "LOCAL", false] }), "LOCAL a0 ×16");
  assert.equal(describeOpt(META, { op: "PADTO", axis: 0, arg: 32 }), "PADTO a0 multiple 32");
  assert.equal(describeOpt(META, { op: "SWAP", axis: 0, arg: 2 }), "SWAP a0 ↔ a2");
  assert.equal(describeOpt(META, { op: "NOLOCALS", axis: null, arg: null }), "NOLOCALS");
  assert.equal(describeOpt(META, { op: "TC", axis: 3, arg: [1, 2] }), "TC a3 [1,2]");
  assert.equal(describeOpts(META, [{ op: "PADTO", axis: 0, arg: 32 }, { op: "NOLOCALS", axis: null, arg: null }]), "PADTO a0 multiple 32, NOLOCALS");
  assert.equal(describeOpts(META, []), "no opts");
  assert.equal(describeOpts(META, null), "no opts");
});

test("formatOpts writes the URL's text, and parseOpts reads it back", () => {
  const opts = [
    { op: "SPLIT", axis: 0, arg: [4, "UPCAST", false] },
    { op: "SPLIT", axis: 1, arg: [16, "LOCAL", true] },
    { op: "PADTO", axis: 1, arg: 32 },
    { op: "SWAP", axis: 0, arg: 2 },
    { op: "NOLOCALS", axis: null, arg: null },
  ];
  const text = formatOpts(opts);
  assert.equal(text, "SPLIT:0:4:UPCAST:0,SPLIT:1:16:LOCAL:1,PADTO:1:32,SWAP:0:2,NOLOCALS");
  assert.deepEqual(parseOpts(META, text), opts);
  assert.equal(formatOpts([]), "-");
  assert.deepEqual(parseOpts(META, "-"), []);
});

test("parseOpts refuses text that names no choice or misses a number", () => {
  for (const bad of ["", "FOO:1", "SPLIT:0:4:THREAD:0", "PADTO:x:32", "PADTO:1", "SWAP:0:-1", "SPLIT:0:four:UPCAST:0", "PADTO:1:32,"]) {
    assert.throws(() => parseOpts(META, bad), /bad opt/, JSON.stringify(bad));
  }
});
