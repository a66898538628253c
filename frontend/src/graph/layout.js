// Layouts come from a Web Worker (src/worker.js) and are cached by graph key (the root id, plus the
// removed nodes drawn beside it), so stepping back and forth never lays out the same graph twice.

export class LayoutEngine {
  constructor(createWorker, capacity = 128) {
    this.createWorker = createWorker;
    this.capacity = capacity;
    this.cache = new Map(); // key -> Promise<layout>, oldest first
    this.pending = new Map(); // request id -> {resolve, reject}
    this.nextId = 0;
    this.worker = null;
  }

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
    if (this.cache.size > this.capacity) this.cache.delete(this.cache.keys().next().value);
    return promise;
  }

  close() {
    this.worker?.terminate();
    this.worker = null;
  }

  request(graph) {
    if (!this.worker) {
      this.worker = this.createWorker();
      this.worker.onmessage = ({ data }) => {
        const { resolve, reject } = this.pending.get(data.id);
        this.pending.delete(data.id);
        if (data.error) reject(new Error(`layout failed: ${data.error}`));
        else resolve(data.layout);
      };
      this.worker.onerror = (event) => {
        event.preventDefault();
        for (const { reject } of this.pending.values()) reject(new Error(`layout worker failed: ${event.message}`));
        this.pending.clear();
        this.worker.terminate();
        this.worker = null;
      };
    }
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, graph });
    });
  }
}
