import assert from "node:assert/strict";
import { test } from "node:test";
import { gzipSync } from "node:zlib";
import { staticSource } from "../src/static.js";
import { META, node } from "./fixtures.js";

// The answers as uopviz/widget/export.py writes them: by request key, steps naming their nodes by id.
const answers = {
  meta: META,
  traces: [{ id: "t1", name: "gemm", source: "zoo", contexts: 1, origin: null }],
  "trace/t1": { id: "t1", name: "gemm", contexts: [] },
  "step/t1/0/2/5": { root: "n2", nodes: ["n2", "n1"], added: ["n2"] },
  "kernel/t1/0": { name: "r_4" },
  "searches/*/*/*": { searches: [{ id: 1 }], next_before: null },
  "searches/abc/*/*": { searches: [], next_before: null },
  "results/*": [],
  nodes: { n1: node("n1", "Const"), n2: node("n2", "Neg", ["n1"]) },
};
const exported = (/** @type {object} */ doc) => `\n  ${gzipSync(JSON.stringify(doc)).toString("base64")}\n`;

test("a static source answers from the inlined answers by request key", async () => {
  const src = await staticSource(exported(answers));
  assert.deepEqual(await src.meta(), META);
  assert.deepEqual(await src.traces(), answers.traces);
  assert.deepEqual(await src.trace("t1"), answers["trace/t1"]);
  assert.deepEqual(await src.kernel("t1", 0), { name: "r_4" });
  assert.deepEqual(await src.searches(), answers["searches/*/*/*"]);
  assert.deepEqual(await src.searches("abc"), answers["searches/abc/*/*"]);
  assert.deepEqual(await src.results(), []);
});

test("a step's nodes come back from the shared node table, in the step's order", async () => {
  const src = await staticSource(exported(answers));
  const step = await src.step("t1", 0, 2, 5);
  assert.deepEqual(step, { root: "n2", nodes: [answers.nodes.n2, answers.nodes.n1], added: ["n2"] });
});

test("what the export does not hold is a 404 naming it; what would change something is a 405", async () => {
  const src = await staticSource(exported(answers));
  await assert.rejects(src.trace("t9"), { name: "DataError", status: 404, message: "this static view holds no trace t9" });
  await assert.rejects(src.step("t1", 0, 2, 6), { status: 404, message: "this static view holds no step t1/0/2/6" });
  for (const call of [() => src.applyOpts("t1", 0, []), () => src.startBeam("t1", 0, 2, 2), () => src.python("t1", 0, 0, 0), () => src.timeKernel("t1", 0), () => src.machineCode("t1", 0), () => src.stopBeam("j1")]) {
    await assert.rejects(call(), { name: "DataError", status: 405 });
  }
});

test("a static view runs no searches: following one ends at once with an error event", async () => {
  const src = await staticSource(exported(answers));
  /** @type {unknown[]} */
  const events = [];
  const stop = src.beamEvents("job", (e) => events.push(e));
  assert.deepEqual(events, [{ event: "error", kind: "failed", detail: "a static view runs no searches" }]);
  stop();
});

test("text that is not gzipped JSON is refused", async () => {
  await assert.rejects(staticSource(Buffer.from("not gzip").toString("base64")));
});
