// The side panel's tabs. A panel is {id, title, create(el, ctx)}; create draws into `el` and returns an instance
// {update(view), destroy()}. The app shows one panel at a time and calls update(view) on it whenever the view
// changes: view is {trace, context, pass, state, step}, where step (the graph's data) is null until it has loaded,
// after which update is called again with it.
//
// ctx is what a panel may use of the app:
//   meta, axisColors   the data source's meta, and AxisType letter -> colour
//   source             the data source (data.js)
//   fetch(key, load)   the app's cache of data-source answers (a promise per key)
//   go(patch, push)    change the view state (push: a new history entry, on the web page)
//   selectNode(id)     select and reveal a node of the graph
//   readOnly           true when the data source cannot change anything (a static export): no opts, no searches
//   variant(tid, ci, opts)   a kernel context lowered again with opts (the opts answer with its kernel view), cached
//   openOpts(opts, patch)    show the kernel with these opts (null: as compiled) at the step of the last one
//   showPython()       the graph of the step shown as Python, in an overlay
//
// mount(el, source, {panels}) takes the list; a view that adds a panel passes [...PANELS, itsPanel].
import { beamPanel } from "./beam.js";
import { kernelPanel } from "./kernel.js";
import { profilePanel } from "./profile.js";
import { rewritePanel } from "./rewrite.js";
import { tracePanel } from "./trace.js";
/** @import { PanelDef } from "../../types/ui" */

/** @type {PanelDef[]} */
export const PANELS = [rewritePanel, kernelPanel, beamPanel, tracePanel, profilePanel];
