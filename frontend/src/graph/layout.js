// Layouts come from a Web Worker (src/worker.js) and are cached by graph key (the root id, plus the
// removed nodes drawn beside it), so stepping back and forth never lays out the same graph twice.

/** @import { DisplayGraph, Layout, LayoutGraph } from "../../types/ui" */

export class LayoutEngine {
  /**
   * @param {() => Worker} createWorker
   * @param {number} [capacity] layouts kept
   */
  constructor(createWorker, capacity = 128) {
    this.createWorker = createWorker;
    this.capacity = capacity;
    /** @type {Map<string, Promise<Layout>>} */
    this.cache = new Map(); // key -> Promise<layout>, oldest first
    /** @type {Map<number, {resolve: (layout: Layout) => void, reject: (err: Error) => void}>} */
    this.pending = new Map(); // request id -> {resolve, reject}
    this.nextId = 0;
    /** @type {Worker | null} */
    this.worker = null;
  }

  /**
   * @param {DisplayGraph} display
   * @returns {Promise<Layout>}
   */
  layout(display) {
    const hit = this.cache.get(display.key);
    if (hit) {
      this.cache.delete(display.key);
      this.cache.set(display.key, hit);
      return hit;
    }
    const graph = {
      nodes: display.nodes.map(({ id, width, height }) => ({ id, width, height })),
      edges: display.edges.map(({ v, w, name }) => ({ v, w, name })),
    };
    const promise = this.request(graph);
    promise.catch(() => this.cache.delete(display.key));
    this.cache.set(display.key, promise);
    if (this.cache.size > this.capacity) this.cache.delete(/** @type {string} */ (this.cache.keys().next().value));
    return promise;
  }

  close() {
    this.worker?.terminate();
    this.worker = null;
  }

  /**
   * @param {LayoutGraph} graph
   * @returns {Promise<Layout>}
   */
  request(graph) {
    if (!this.worker) {
      this.worker = this.createWorker();
      this.worker.onmessage = ({ data }) => {
        const { resolve, reject } = /** @type {{resolve: (layout: Layout) => void, reject: (err: Error) => void}} */ (this.pending.get(data.id));
        this.pending.delete(data.id);
        if (data.error) reject(new Error(`layout failed: ${data.error}`));
        else resolve(data.layout);
      };
      this.worker.onerror = (event) => {
        event.preventDefault();
        for (const { reject } of this.pending.values()) reject(new Error(`layout worker failed: ${event.message}`));
        this.pending.clear();
        /** @type {Worker} */ (this.worker).terminate();
        this.worker = null;
      };
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      /** @type {Worker} */ (this.worker).postMessage({ id, graph });
    });
  }
}
