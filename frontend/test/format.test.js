import assert from "node:assert/strict";
import { test } from "node:test";
import { pathTo, timed, whereLine } from "../src/panels/beam.js";
import { candidateKind, formatSeconds } from "../src/panels/beam-chart.js";
import { ratioText, speedText } from "../src/panels/kernel.js";
import { formatNs, madeAt } from "../src/sidebar.js";

test("formatNs: µs, ms and s, one decimal below ten of a unit", () => {
  assert.deepEqual([0, 999, 9_999, 10_000, 999_999].map(formatNs), ["0.0 µs", "1.0 µs", "10.0 µs", "10 µs", "1000 µs"]);
  assert.deepEqual([1e6, 9.94e6, 1e7, 999e6].map(formatNs), ["1.0 ms", "9.9 ms", "10 ms", "999 ms"]);
  assert.deepEqual([1e9, 12.345e9].map(formatNs), ["1.00 s", "12.35 s"]);
});

test("formatSeconds: µs below a millisecond, ms below a second; none is a dash", () => {
  assert.deepEqual([1.234e-6, 5e-5, 2.5e-4, 1e-3, 0.5, 1, 12.3456].map(formatSeconds), ["1.23 µs", "50.0 µs", "250.0 µs", "1.00 ms", "500.00 ms", "1.000 s", "12.346 s"]);
  assert.equal(formatSeconds(null), "–");
  assert.equal(formatSeconds(undefined), "–");
});

test("speedText: the time with GFLOP/s and GB/s where the work is known", () => {
  assert.equal(speedText(0.5, { flops: 16e9, bytes: 1e8 }), "500.00 ms · 32.0 GFLOP/s · 0.20 GB/s");
  assert.equal(speedText(0.5, { flops: null, bytes: 4e9 }), "500.00 ms · 8.00 GB/s");
  assert.equal(speedText(2e-6, null), "2.00 µs");
  assert.equal(speedText(0, { flops: 1, bytes: 1 }), "0.00 µs");
});

test("madeAt: the innermost frame's file name and line", () => {
  const frame = (/** @type {string} */ file, /** @type {number} */ line) => ({ file, line, function: "f", code: "" });
  assert.equal(madeAt({ stack: [frame("a/outer.py", 3), frame("models/net.py", 12)] }), "net.py:12");
  assert.equal(madeAt({ stack: [] }), null);
});

/** @param {number} id @param {number | null} parent @param {number} round @param {string[]} ops @param {number | null} [median] */
const cand = (id, parent, round, ops, median = 1) => ({ id, parent, round, opts: ops.map((op) => ({ op, axis: 0, arg: 2 })), error: null, samples: [], median_s: median, duplicate: false });

test("candidateKind: the unoptimized kernel, the heuristic's, a step, and the final re-timing", () => {
  const base = cand(1, null, 0, []);
  const heur = cand(2, 1, 0, ["UPCAST", "UNROLL"]);
  const stepped = cand(3, 1, 1, ["UPCAST"]);
  const again = cand(9, 3, 4, ["UPCAST"]);
  assert.deepEqual([candidateKind(base, null), candidateKind(heur, base), candidateKind(stepped, base), candidateKind(again, stepped)], ["unoptimized", "heuristic", "step", "re-timed"]);
  assert.equal(candidateKind(again, null), "step");
});

test("pathTo: from the unoptimized kernel to the best, each the parent of the next", () => {
  const cands = [cand(1, null, 0, []), cand(2, 1, 1, ["A"]), cand(3, 2, 2, ["A", "B"]), cand(4, 1, 1, ["C"])];
  assert.deepEqual(pathTo(cands, 3), [1, 2, 3]);
  assert.deepEqual(pathTo(cands, 4), [1, 4]);
  assert.deepEqual(pathTo(cands, null), []);
  assert.deepEqual(pathTo(cands, 99), []);
  // a parent that is not listed (a live search's view so far) ends the path there; a loop does not hang it
  assert.deepEqual(pathTo([cand(5, 2, 2, [])], 5), [5]);
  assert.deepEqual(pathTo([cand(6, 7, 1, []), cand(7, 6, 1, [])], 6), [7, 6]);
});

test("timed: verified candidates with a time", () => {
  assert.equal(timed(cand(1, null, 0, [], 0.1)), true);
  assert.equal(timed(cand(1, null, 0, [], null)), false);
  assert.equal(timed({ ...cand(1, null, 0, [], 0.1), error: "wrong answer" }), false);
});

test("whereLine: the executor, and how many machines timed the candidates when more than one", () => {
  const on = (/** @type {string | null} */ m) => ({ measured_on: m });
  assert.equal(whereLine("this machine", [on("a"), on("a")]), " · this machine");
  assert.equal(whereLine("ray: 3 nodes", [on("a"), on("b"), on(null), on("b")]), " · ray: 3 nodes, timed on 2 machines");
  assert.equal(whereLine(null, [on("a"), on("b")]), "");
});

test("ratioText: a variant's time against the kernel as compiled", () => {
  assert.equal(ratioText(0.002, 0.001), "2.00× faster");
  assert.equal(ratioText(0.001, 0.0011), "1.10× slower");
  assert.equal(ratioText(0.001, 0.001002), "the same");
  assert.equal(ratioText(0, 0.001), "—");
});
