import assert from "node:assert/strict";
import { test } from "node:test";
import { LayoutEngine } from "../src/graph/layout.js";
/** @import { DisplayGraph } from "../types/ui" */

// A layout worker that holds each request until the test answers it.
class FakeWorker {
  constructor() {
    /** @type {{id: number, graph: any}[]} */
    this.requests = [];
    this.terminated = false;
    /** @type {((event: {data: any}) => void) | null} */
    this.onmessage = null;
    /** @type {((event: {message: string, preventDefault(): void}) => void) | null} */
    this.onerror = null;
  }
  /** @param {{id: number, graph: any}} msg */
  postMessage(msg) {
    this.requests.push(msg);
  }
  terminate() {
    this.terminated = true;
  }
  /** @param {number} index which request @param {object} answer */
  answer(index, answer) {
    this.onmessage?.({ data: { id: this.requests[index].id, ...answer } });
  }
}

/** @param {string} key @returns {DisplayGraph} */
const display = (key) => ({
  key,
  root: "a",
  nodes: [{ id: "a", ref: "a", refs: ["a"], op: "Sink", group: "other", axisType: null, lines: [], expr: null, hub: false, status: null, fill: "#000", ink: "#fff", width: 40, height: 20 }],
  edges: [],
  match: null,
  replacement: null,
  total: 1,
});
const LAYOUT = { width: 88, height: 68, nodes: /** @type {[number, number][]} */ ([[44, 34]]), edges: [] };

function engine(capacity = 128) {
  /** @type {FakeWorker[]} */
  const workers = [];
  const layouts = new LayoutEngine(() => {
    const w = new FakeWorker();
    workers.push(w);
    return /** @type {Worker} */ (/** @type {unknown} */ (w));
  }, capacity);
  return { layouts, workers };
}

test("the worker gets only what it lays out, and starts on the first request", async () => {
  const { layouts, workers } = engine();
  assert.equal(workers.length, 0);
  const p = layouts.layout(display("k1"));
  assert.deepEqual(workers[0].requests, [{ id: 0, graph: { nodes: [{ id: "a", width: 40, height: 20 }], edges: [] } }]);
  workers[0].answer(0, { layout: LAYOUT });
  assert.deepEqual(await p, LAYOUT);
});

test("a graph's layout is asked once: the same key gets the same promise", () => {
  const { layouts, workers } = engine();
  const p = layouts.layout(display("k1"));
  assert.equal(layouts.layout(display("k1")), p);
  layouts.layout(display("k2"));
  assert.equal(workers[0].requests.length, 2);
});

test("the cache keeps the most recently used layouts", () => {
  const { layouts, workers } = engine(2);
  const p1 = layouts.layout(display("k1"));
  layouts.layout(display("k2"));
  layouts.layout(display("k1")); // used again: k2 is now the oldest
  layouts.layout(display("k3"));
  assert.equal(layouts.layout(display("k1")), p1);
  layouts.layout(display("k2")); // evicted, asked again
  assert.equal(workers[0].requests.length, 4);
});

test("a failed layout rejects and is forgotten, so the next request asks again", async () => {
  const { layouts, workers } = engine();
  const p = layouts.layout(display("k1"));
  workers[0].answer(0, { error: "boom" });
  await assert.rejects(p, { message: "layout failed: boom" });
  layouts.layout(display("k1"));
  assert.equal(workers[0].requests.length, 2);
});

test("a worker that fails rejects what it had pending and is replaced", async () => {
  const { layouts, workers } = engine();
  const pending = [layouts.layout(display("k1")), layouts.layout(display("k2"))];
  let prevented = false;
  workers[0].onerror?.({ message: "out of memory", preventDefault: () => (prevented = true) });
  for (const p of pending) await assert.rejects(p, { message: "layout worker failed: out of memory" });
  assert.ok(prevented && workers[0].terminated);
  const again = layouts.layout(display("k1"));
  assert.equal(workers.length, 2);
  workers[1].answer(0, { layout: LAYOUT });
  assert.deepEqual(await again, LAYOUT);
});

test("close stops the worker", () => {
  const { layouts, workers } = engine();
  layouts.layout(display("k1"));
  layouts.close();
  assert.equal(workers[0].terminated, true);
  layouts.close(); // twice is fine
});
