import assert from "node:assert/strict";
import { test } from "node:test";
import { byTime, timelineSpans } from "../src/panels/profile.js";
/** @import { LaunchRow } from "../types/api" */

/**
 * @param {number} time_s
 * @returns {LaunchRow}
 */
const launch = (time_s) => ({ kernel: "E_4", context: 1, device: "CPU", time_s, device_s: time_s, flops: 0, bytes: 0, share: 0, gflops: 0, gbs: 0, roof: 0, bound: "memory", line: null });

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
