// The bundle's entry (dist/app.js, an ES module): mount the UI into an element over a data source.
import { App } from "./app.js";

export { DataError, httpSource } from "./data.js";

// mount(el, source, options) draws the UI into `el` and returns {destroy()}.
//   source: a data source (see data.js), e.g. httpSource() for `uopviz serve`.
//   options.hash: keep the view in location.hash (default true; a notebook widget passes false).
//   options.createWorker: returns the layout Web Worker (default: worker.js next to app.js).
export function mount(el, source, options = {}) {
  const app = new App(el, source, {
    hash: options.hash ?? true,
    createWorker: options.createWorker ?? (() => new Worker(new URL("./worker.js", import.meta.url))),
  });
  app.start();
  return { destroy: () => app.destroy() };
}
