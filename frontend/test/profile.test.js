import assert from "node:assert/strict";
import { test } from "node:test";
import { byLine, byTime, launchColumns, timelineSpans } from "../src/panels/profile.js";
/** @import { LaunchRow, NodeOrigin } from "../types/api" */

/**
 * @param {number} time_s
 * @returns {LaunchRow}
 */
const launch = (time_s) => ({ kernel: "E_4", context: 1, device: "CPU", time_s, device_s: time_s, flops: 0, bytes: 0, share: 0, gflops: 0, gbs: 0, roof: 0, bound: "memory", line: null, origin: null });

test("the timeline lays launches end to end, each as wide as its share of the time", () => {
  const spans = timelineSpans([launch(1), launch(3), launch(4)]);
  assert.deepEqual(spans, [
    { start: 0, width: 0.125 },
    { start: 0.125, width: 0.375 },
    { start: 0.5, width: 0.5 },
  ]);
});

test("launches that took no time at all still have a place", () => {
  assert.deepEqual(timelineSpans([launch(0), launch(0)]), [
    { start: 0, width: 0 },
    { start: 0, width: 0 },
  ]);
});

test("the table lists the most time first, launch order among equals", () => {
  assert.deepEqual(byTime([launch(1), launch(5), launch(1), launch(2)]), [1, 3, 0, 2]);
});

/**
 * @param {string} op
 * @param {number} line
 * @param {NodeOrigin | null} grad_of
 * @returns {NodeOrigin}
 */
const made = (op, line, grad_of = null) => ({ op, file: "/home/me/model.py", line, function: "forward", code: "x = f(x)", grad_of });

test("launches group under the Tensor line that made their kernels, a gradient's apart under its forward line", () => {
  const ran = { file: "train.py", line: 9, function: "<module>", code: "loss.backward()" };
  const launches = [
    { ...launch(1), share: 0.1, origin: made("Tensor.softmax", 42) },
    { ...launch(4), share: 0.4, origin: made("Tensor.backward", 9, made("Tensor.softmax", 42)), line: ran },
    { ...launch(2), share: 0.2, origin: made("Tensor.softmax", 42) },
    { ...launch(3), share: 0.3, origin: null, line: ran },
  ];
  const groups = byLine(launches);
  assert.deepEqual(
    groups.map((g) => [g.line?.line, g.op, g.backward, g.launches, g.time_s]),
    [
      [42, "Tensor.softmax", true, [1], 4],
      [42, "Tensor.softmax", false, [0, 2], 3],
      [9, null, false, [3], 3],
    ],
  );
  assert.ok(Math.abs(groups[1].share - 0.3) < 1e-12);
});

test("the launch table has a made-by column only where some launch knows its maker", () => {
  assert.ok(!launchColumns([launch(1), launch(2)]).includes("made by"));
  const made = { ...launch(1), origin: /** @type {NodeOrigin} */ ({ op: "Tensor.relu", file: "m.py", line: 3, function: "f", code: "x.relu()", grad_of: null }) };
  assert.deepEqual(launchColumns([launch(2), made]), ["kernel", "made by", "time", "share", "GFLOP/s", "GB/s", "roof"]);
});
