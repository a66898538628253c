// The bundle's entry (dist/app.js, an ES module): the web page, the notebook widget and the static export all
// load this one file.
//   the web page:   import { mount, httpSource, pageToken } from "./app.js"; mount(el, httpSource("", pageToken()))
//   the widget:     anywidget imports it and calls the default export's render({model, el}) (widget.js)
//   a static view:  the export's loader imports it and calls mount(el, await staticSource(text), {readOnly: true})
import WORKER_SOURCE from "uopviz:worker-source";
import { App } from "./app.js";
import { PANELS } from "./panels/registry.js";
import { createWidget } from "./widget.js";
/** @import { DataSource } from "../types/api" */
/** @import { PanelDef, ViewState } from "../types/ui" */

export { DataError, httpSource, pageToken } from "./data.js";
export { PANELS } from "./panels/registry.js";
export { staticSource } from "./static.js";
export default createWidget(mount);

// mount(el, source, options) draws the UI into `el` and returns {destroy(), go(patch)}.
//   source: a data source (see data.js), e.g. httpSource("", pageToken()) for `uopviz serve`.
//   options.hash: keep the view in location.hash (default true; a widget or a static view passes false).
//   options.panels: the side panel's tabs (default PANELS; see panels/registry.js).
//   options.readOnly: the source changes nothing (a static export): no opt form, no BEAM search form.
//   options.initial: the view state to start from ({tid, ci, pi, k, opts, tab}, any of them).
//   options.onState(state): told the view state after every change.
// The layout worker is made from the bundle itself (a Blob URL), so the UI needs no file beside it.
/**
 * @typedef {object} MountOptions
 * @property {boolean} [hash]
 * @property {PanelDef[]} [panels]
 * @property {boolean} [readOnly]
 * @property {Partial<ViewState>} [initial]
 * @property {(state: ViewState) => void} [onState]
 */
/**
 * @param {HTMLElement} el
 * @param {DataSource} source
 * @param {MountOptions} [options]
 * @returns {{destroy(): void, go(patch: Partial<ViewState>): void}}
 */
export function mount(el, source, options = {}) {
  const workerUrl = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
  const app = new App(el, source, {
    hash: options.hash ?? true,
    panels: options.panels ?? PANELS,
    readOnly: options.readOnly ?? false,
    initial: options.initial,
    onState: options.onState,
    createWorker: () => new Worker(workerUrl),
  });
  app.start();
  return {
    destroy: () => {
      app.destroy();
      URL.revokeObjectURL(workerUrl);
    },
    go: (patch) => app.go(patch),
  };
}
