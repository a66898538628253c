// The application: page layout, the view state, and navigation. It reads all data through the data source given
// to mount() (see data.js), so it runs the same over HTTP, a widget comm, or data inlined in a static page. The
// side panel's tabs are the panels it is given (panels/registry.js). On the web page the view state lives in the
// URL hash; in a notebook widget (hash: false) nothing is global: no hash, no document-level listener.
//
// A kernel lowered again with opts (state.opts) is a trace of its own on the data source; the app draws that
// trace's passes in place of the kernel's, so the graph follows the opts, and lists such variants under the kernel.
import { columnWidths } from "./columns.js";
import { fill, h, icon, typing } from "./dom.js";
import { DEFAULT_OPTIONS, displayGraph, kernelsByBody, searchText } from "./graph/display.js";
import { renderInspector } from "./graph/inspector.js";
import { LayoutEngine } from "./graph/layout.js";
import { legend } from "./graph/legend.js";
import { linearOf, renderListing } from "./graph/listing.js";
import { GraphView } from "./graph/view.js";
import { highlight } from "./highlight.js";
import { kernelName } from "./names.js";
import { describeOpts, formatOpts } from "./opts.js";
import { Overlay } from "./overlay.js";
import { Sidebar } from "./sidebar.js";
import { emptyState, formatHash, parseHash } from "./state.js";
/** @import { ContextInfo, DataSource, GraphNode, Meta, Opt, OptsOrigin, PassInfo, StepView, TraceDetail, TraceSummary } from "../types/api" */
/** @import { DisplayGraph, Panel, PanelContext, PanelDef, PanelView, ShownState, Variant, ViewState } from "../types/ui" */
/**
 * @typedef {object} AppOptions
 * @property {boolean} hash keep the view in location.hash
 * @property {() => Worker} createWorker the layout worker
 * @property {PanelDef[]} panels the side panel's tabs
 * @property {boolean} [readOnly] a source that changes nothing
 * @property {Partial<ViewState>} [initial] a view state to start from, without hash
 * @property {(state: ViewState) => void} [onState] told the view state after each change
 */

const ICONS = { first: "M3 3h2v10H3zM13 3v10L6 8z", prev: "M11 3v10L4 8z", next: "M5 3v10l7-5z", last: "M11 3h2v10h-2zM3 3v10l7-5z" };
// Stages whose kernels are big (UPCAST copies, devectorized lanes, index math of every load): there the graph folds
// index arithmetic and collapses copies alike unless the person says otherwise.
// The context a trace opens on: its first reduction kernel (named r_...: a matmul, not the copy into panels that
// comes before it, nor the padded input a convolution stores first), else its first kernel, else the first context.
/** @param {ContextInfo[]} ctxs */
function openingKernel(ctxs) {
  const kernels = ctxs.map((c, i) => /** @type {[ContextInfo, number]} */ ([c, i])).filter(([c]) => c.kind === "kernel");
  const pick = kernels.find(([c]) => c.name.startsWith("r_")) ?? kernels[0];
  return pick ? pick[1] : 0;
}

const NARROW = 640; // px of view below which the sidebar starts folded (the ☰ button shows it)
const LATE_STAGES = new Set(["Expand", "Instruction Selection", "Linearize", "Register/Memory Plan", "Render"]);


export class App {
  // options: hash (keep the view in location.hash), createWorker (the layout worker), panels (the side panel's
  // tabs), readOnly (a source that changes nothing), initial (a view state to start from, without hash),
  // onState(state) (told the view state after each change, e.g. a widget's traitlets).
  /**
   * @param {HTMLElement} root
   * @param {DataSource} source
   * @param {AppOptions} options
   */
  constructor(root, source, { hash, createWorker, panels, readOnly = false, initial = {}, onState = () => {} }) {
    this.root = root;
    this.source = source;
    this.useHash = hash;
    this.panelDefs = panels;
    this.readOnly = readOnly;
    this.onState = onState;
    this.layouts = new LayoutEngine(createWorker);
    /** @type {Map<string, Promise<any>>} */
    this.cache = new Map(); // data-source answers by request key, as promises
    /** @type {ViewState} */
    this.state = { ...emptyState(), ...initial };
    this.token = 0;
    this.showRemoved = true;
    // the graph's views: null follows the stage (on late), a boolean is the person's choice
    /** @type {{index: boolean | null, lanes: boolean | null, listing: boolean | null, calls: boolean | null, hidden: Set<string>}} */
    this.views = { index: null, lanes: null, listing: null, calls: null, hidden: new Set() };
    this.query = "";
    /** @type {{trace: TraceDetail, names: Map<string, ContextInfo>} | null} */
    this.kernelsOf = null;
    /** @type {number[]} */
    this.hits = [];
    this.hit = -1;
    /** @type {string | null} */
    this.selected = null;
    /** @type {string | null} */
    this.drawnPass = null;
    /** @type {Map<string, Panel>} */
    this.panels = new Map(); // id -> the panel's instance
    /** @type {(() => void)[]} */
    this.cleanups = [];
  }

  // Hides the sidebar, or shows it again: the graph takes its width (a narrow notebook output).
  foldSide() {
    const folded = this.root.classList.toggle("uv-side-folded");
    /** @type {HTMLElement} */ (this.root.querySelector(".uv-side-button")).setAttribute("aria-pressed", String(folded));
    this.view?.fit();
  }

  async start() {
    /** @type {boolean} */
    this.legendOpen = false; // folded to one button: open, it covers the graph's lower left on any screen (l opens it)
    this.buildLayout();
    this.status("Loading…");
    try {
      const [meta, traces] = await Promise.all([this.source.meta(), this.source.traces()]);
      /** @type {Meta} */
      this.meta = meta;
      /** @type {TraceSummary[]} */
      this.traces = traces;
    } catch (err) {
      this.status(err.message, true);
      return;
    }
    if (this.useHash && location.hash.length > 1) this.state = this.fromHash(); // none: the view it was given
    /** @type {Map<string, string>} */
    this.axisColors = new Map(this.meta.axis_types.map((t) => [t.letter, t.color]));
    /** @type {Map<string, string>} */
    this.opColors = new Map(this.meta.op_groups.flatMap((g) => g.ops.map((op) => [op, g.color])));
    /** @type {Sidebar} */
    this.sidebar = new Sidebar(this.els.side, this.axisColors, (patch, push) => this.go(patch, push), (opts) => describeOpts(this.meta, opts));
    /** @type {PanelContext} */
    const ctx = {
      meta: this.meta,
      axisColors: this.axisColors,
      source: this.source,
      readOnly: this.readOnly,
      fetch: (key, load) => this.fetch(key, load),
      step: (tid, ci, pi, k) => this.stepData(tid, ci, pi, k),
      go: (patch, push) => this.go(patch, push),
      state: () => this.state,
      selectNode: (id) => this.selectNode(id, true),
      variant: (tid, ci, opts) => this.variant(tid, ci, opts),
      openOpts: (opts, patch) => this.openOpts(opts, patch),
      showText: (title, text) => this.overlay.text(title, text),
      showPython: () => this.showPython(),
    };
    for (const p of this.panelDefs) this.panels.set(p.id, p.create(/** @type {HTMLDivElement} */ (this.els.tabBodies.get(p.id)), ctx));
    this.drawLegend();
    this.buildFilters();
    if (this.useHash) this.listen(window, "hashchange", () => this.onHash());
    await this.render();
  }

  destroy() {
    this.token++;
    for (const panel of this.panels.values()) panel.destroy();
    for (const undo of this.cleanups) undo();
    this.layouts.close();
    this.root.replaceChildren();
  }

  fromHash() {
    return parseHash(
      location.hash,
      this.meta,
      this.panelDefs.map((p) => p.id),
    );
  }

  /**
   * @template {Event} E
   * @param {EventTarget} target
   * @param {string} type
   * @param {(event: E) => void} fn
   */
  listen(target, type, fn) {
    target.addEventListener(type, /** @type {EventListener} */ (fn));
    this.cleanups.push(() => target.removeEventListener(type, /** @type {EventListener} */ (fn)));
  }

  buildLayout() {
    /**
     * @template {keyof HTMLElementTagNameMap} K
     * @param {K} tag
     * @param {string} cls
     * @param {...import("./dom.js").Child} children
     */
    const el = (tag, cls, ...children) => h(tag, { class: cls }, ...children);
    const els = {
      side: el("nav", "uv-side"),
      crumbs: el("div", "uv-crumbs"),
      status: el("div", "uv-status"),
      stepLabel: el("span", "uv-step-label"),
      slider: h("input", { class: "uv-slider", type: "range", min: 0, max: 0, value: 0, "aria-label": "step", oninput: (/** @type {{target: HTMLInputElement}} */ e) => this.go({ k: Number(e.target.value) }) }),
      graph: el("div", "uv-graph"),
      listing: h("div", { class: "uv-listing", hidden: true }),
      inspector: h("div", { class: "uv-inspector", hidden: true }),
      legend: el("div", "uv-legend"),
      tools: el("div", "uv-graph-tools"),
      drawn: el("span", "uv-drawn"),
      filters: h("div", { class: "uv-filters", hidden: true }),
      search: h("input", { class: "uv-search", type: "search", placeholder: "search  /", "aria-label": "search the graph", oninput: (/** @type {{target: HTMLInputElement}} */ e) => this.search(e.target.value) }),
      hits: el("span", "uv-hits"),
      tabs: el("div", "uv-tabs"),
      tabBodies: new Map(this.panelDefs.map((p) => [p.id, el("div", `uv-tab-body uv-${p.id}`)])),
    };
    /** @type {typeof els} */
    this.els = els;
    /** @type {(cls: string, label: string | Node, title: string, onclick: () => void) => HTMLButtonElement} */
    const button = (cls, label, title, onclick) => h("button", { class: `uv-button ${cls}`, title, onclick }, label);
    /** @type {Record<string, HTMLButtonElement>} */
    this.toggles = {};
    /** @type {(name: string, label: string, title: string, onclick: () => void) => HTMLButtonElement} */
    const toggle = (name, label, title, onclick) => (this.toggles[name] = button(`uv-toggle uv-${name}`, label, title, onclick));
    els.search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.nextHit(e.shiftKey ? -1 : 1);
      else if (e.key === "Escape") {
        this.search("");
        els.search.value = "";
        this.root.focus({ preventScroll: true });
      } else return;
      e.preventDefault();
      e.stopPropagation();
    });
    fill(
      els.tools,
      button("uv-fit", "fit", "frame the whole graph (f)", () => this.view.fit()),
      toggle("removed", "removed", "draw the nodes this step removed", () => {
        this.showRemoved = !this.showRemoved;
        this.render();
      }),
      toggle("index", "index", "fold index arithmetic into the Index nodes that read it (i)", () => this.flip("index")),
      toggle("calls", "kernels", "draw each Call of a schedule as one box over its inputs and outputs, its kernel's body folded (k; a Call's inspector draws one kernel in place)", () => this.flip("calls")),
      toggle("lanes", "copies", "draw nodes alike but for their constants (UPCAST copies, vector lanes) once, with a count (c)", () => this.flip("lanes")),
      (this.toggles.filter = button("uv-filter", "ops ▾", "hide op groups (their users are wired to their sources)", () => (els.filters.hidden = !els.filters.hidden))),
      toggle("listing", "listing", "the instruction listing of a Linear program instead of its graph (g)", () => this.flip("listing")),
      h("span", { class: "uv-search-box" }, els.search, els.hits),
      els.drawn,
      button("uv-help-button", "?", "keys (?)", () => this.overlay.help()),
    );
    this.root.classList.add("uv-app");
    this.root.tabIndex = 0;
    fill(
      this.root,
      h(
        "header",
        { class: "uv-top" },
        button("uv-side-button", "☰", "show or hide the sidebar (b)", () => this.foldSide()),
        el("div", "uv-brand", "uopviz"),
        els.crumbs,
        h(
          "div",
          { class: "uv-stepper" },
          button("uv-first", icon(ICONS.first), "first step (Home)", () => this.stepTo(0)),
          button("uv-prev", icon(ICONS.prev), "previous step (←)", () => this.stepBy(-1)),
          els.stepLabel,
          button("uv-next", icon(ICONS.next), "next step (→)", () => this.stepBy(1)),
          button("uv-last", icon(ICONS.last), "last step (End)", () => this.stepTo(Infinity)),
          els.slider,
        ),
        els.status,
        // in a notebook's output the view can take the whole window, and give it back
        !this.useHash && button("uv-wide-button", "⤢", "the whole window (again: back into the notebook)", () => this.root.classList.toggle("uv-wide")),
      ),
      els.side,
      this.resizer("--uv-side-w", 1),
      h("main", { class: "uv-main" }, els.graph, els.listing, els.tools, els.filters, els.inspector, els.legend),
      this.resizer("--uv-panel-w", -1),
      h("aside", { class: "uv-panel" }, els.tabs, [...els.tabBodies.values()]),
    );
    /** @type {Overlay} */
    this.overlay = new Overlay(this.root);
    // A narrow view (a notebook, a laptop, half a notebook's width) gives the graph more of its width, as it is
    // sized and resized, until a person drags a column's edge.
    this.dragged = false;
    const fit = () => {
      const columns = this.dragged ? null : columnWidths(this.root.clientWidth);
      if (!columns) return;
      this.root.style.setProperty("--uv-side-w", `${columns.side}px`);
      this.root.style.setProperty("--uv-panel-w", `${columns.panel}px`);
    };
    fit();
    if (this.root.clientWidth && this.root.clientWidth < NARROW) this.foldSide(); // its names would wrap a few letters a line
    const sized = new ResizeObserver(fit);
    sized.observe(this.root);
    this.cleanups.push(() => sized.disconnect());
    /** @type {GraphView} */
    this.view = new GraphView(els.graph, (ref) => this.selectNode(ref, false), () => ({
      top: els.tools.offsetHeight + 16,
      bottom: (els.legend.offsetHeight || 0) + 14,
    }));
    this.cleanups.push(() => this.view.destroy());
    this.listen(this.root, "keydown", (/** @type {KeyboardEvent} */ e) => {
      this.onKey(e);
      // In a notebook the keys typed in the view are the view's: none reaches JupyterLab's shortcuts (a cell's
      // arrows, "a", "b", ...); combinations with Ctrl/Alt/Meta (save, run) still do.
      if (!this.useHash && !(e.altKey || e.ctrlKey || e.metaKey)) e.stopPropagation();
    });
    // The page of its own takes the keyboard at once; in a notebook (and a static view in one) the pointer coming
    // over the view gives it the keys, unless the user is typing somewhere (an editor, a field keeps them).
    if (this.useHash) this.root.focus({ preventScroll: true });
    this.listen(this.root, "pointerenter", () => {
      if (!typing(document.activeElement)) this.root.focus({ preventScroll: true });
    });
  }

  // The op-group filter: a checkbox per group (and "other"); unticked groups are not drawn.
  buildFilters() {
    const groups = [...this.meta.op_groups.map((g) => [g.name, g.color]), ["other", this.meta.other_color]];
    fill(
      this.els.filters,
      groups.map(([name, color]) =>
        h(
          "label",
          { class: "uv-filter-item" },
          h("input", {
            type: "checkbox",
            checked: true,
            dataset: { group: name },
            onchange: (/** @type {{target: HTMLInputElement}} */ e) => {
              if (e.target.checked) this.views.hidden.delete(name);
              else this.views.hidden.add(name);
              this.render();
            },
          }),
          h("i", { class: "uv-swatch", style: `background:${color}` }),
          name,
        ),
      ),
    );
  }

  drawLegend() {
    const next = legend(this.meta, this.legendOpen, () => {
      this.legendOpen = !this.legendOpen;
      this.drawLegend();
    });
    this.els.legend.replaceWith(next);
    this.els.legend = next;
  }

  // A drag handle that resizes the column whose width is in CSS variable `name` (sign: which side grows).
  /**
   * @param {string} name
   * @param {number} sign
   */
  resizer(name, sign) {
    const handle = h("div", { class: `uv-resizer ${sign > 0 ? "uv-resizer-side" : "uv-resizer-panel"}`, role: "separator", title: "drag to resize" });
    handle.addEventListener("pointerdown", (down) => {
      this.dragged = true;
      const start = parseFloat(getComputedStyle(this.root).getPropertyValue(name));
      handle.setPointerCapture(down.pointerId);
      /** @param {PointerEvent} e */
      const move = (e) => this.root.style.setProperty(name, `${Math.max(160, Math.min(900, start + sign * (e.clientX - down.clientX)))}px`);
      handle.addEventListener("pointermove", move);
      handle.addEventListener("pointerup", () => handle.removeEventListener("pointermove", move), { once: true });
    });
    return handle;
  }

  /**
   * @param {string} text
   * @param {boolean} [isError]
   */
  status(text, isError = false) {
    this.els.status.textContent = text;
    this.els.status.classList.toggle("uv-error", isError);
  }

  // Data-source answers are cached by key (as promises); failed ones are forgotten so they can be retried.
  /**
   * @template T
   * @param {string} key
   * @param {() => Promise<T>} load
   * @returns {Promise<T>}
   */
  fetch(key, load) {
    if (!this.cache.has(key)) {
      const promise = load();
      promise.catch(() => this.cache.delete(key));
      this.cache.set(key, promise);
    }
    return /** @type {Promise<T>} */ (this.cache.get(key));
  }

  /** @type {(tid: string) => Promise<TraceDetail>} */
  trace = (tid) => this.fetch(`trace/${tid}`, () => this.source.trace(tid));
  /** @type {(tid: string, ci: number, pi: number, k: number) => Promise<StepView>} */
  stepData = (tid, ci, pi, k) => this.fetch(`step/${tid}/${ci}/${pi}/${k}`, () => this.source.step(tid, ci, pi, k));

  // Context ci of trace tid lowered again with exactly `opts`: the opts answer (its trace_id is the lowering's
  // trace) with the new kernel's view (device, listing) when it loads.
  /**
   * @param {string} tid
   * @param {number} ci
   * @param {Opt[]} opts
   * @returns {Promise<Variant>}
   */
  variant(tid, ci, opts) {
    return this.fetch(`opts/${tid}/${ci}/${formatOpts(opts)}`, async () => {
      const applied = await this.source.applyOpts(tid, ci, opts);
      /** @type {Partial<import("../types/api").KernelView>} */
      const lowered = applied.trace_id == null ? {} : await this.source.kernel(applied.trace_id, 0).catch(() => ({}));
      return { ...lowered, ...applied };
    });
  }

  // Show the kernel with `opts` (null: as compiled), at the step where its last opt was applied, so the graph shows
  // what that opt did; rejects (with the reason) when the opts do not apply.
  /**
   * @param {Opt[] | null} opts
   * @param {Partial<ViewState>} [patch]
   */
  async openOpts(opts, patch = {}) {
    const { tid, ci } = /** @type {ShownState} */ (this.state); // a kernel is shown
    const shown = opts ? await this.variant(tid, ci, opts).then((v) => ({ tid: /** @type {string} */ (v.trace_id), ci: 0 })) : { tid, ci };
    const passes = (await this.trace(shown.tid)).contexts[shown.ci].passes;
    const pi = passes.findLastIndex((p) => p.opt);
    this.go({ opts, ...(pi >= 0 ? { pi, k: passes[pi].steps } : {}), ...patch }, true);
  }

  /**
   * @param {Partial<ViewState>} patch
   * @param {boolean} [push] a new history entry
   */
  go(patch, push = false) {
    const other = (patch.tid !== undefined && patch.tid !== this.state.tid) || (patch.ci !== undefined && patch.ci !== this.state.ci);
    this.state = { ...this.state, ...(other ? { calls: [] } : {}), ...patch }; // opened Calls are a context's
    this.render(push);
  }

  // Turn one of the graph's views on or off (away from what the stage chose).
  /** @param {"index" | "lanes" | "listing" | "calls"} name */
  flip(name) {
    this.views[name] = !this.effective(name);
    this.render();
  }

  // Whether a view is on: the person's choice, else the stage's (index and copies fold in late stages; the listing
  // is the main view of a Linear program; a schedule's Calls are boxes, their kernels folded).
  /**
   * @param {"index" | "lanes" | "listing" | "calls"} name
   * @returns {boolean}
   */
  effective(name) {
    if (this.views[name] != null) return this.views[name];
    if (name === "listing") return Boolean(this.step && linearOf(this.step));
    if (name === "calls") return true;
    return LATE_STAGES.has(/** @type {string} */ (this.pass?.stage));
  }

  onHash() {
    if (location.hash !== formatHash(this.state)) {
      this.state = this.fromHash();
      this.render();
    }
  }

  /** @param {boolean} push */
  writeHash(push) {
    if (!this.useHash) return;
    const hash = formatHash(this.state);
    if (hash !== location.hash) history[push ? "pushState" : "replaceState"](null, "", hash || location.pathname + location.search);
  }

  // Brings the page in line with this.state, fetching what it needs; a newer call supersedes an older one.
  async render(push = false) {
    // Not started yet (a widget's traitlets can move the view before its first answers come): start() draws the
    // state when they have.
    if (!this.traces) return;
    const token = ++this.token;
    const started = performance.now();
    const s = this.state;
    if (s.tid != null && !this.traces.some((t) => t.id === s.tid)) {
      // a trace recorded since the list was read, or a stale link
      try {
        this.traces = await this.source.traces();
      } catch (err) {
        return this.status(err.message, true);
      }
      if (token !== this.token) return;
    }
    // an opts trace is shown as what it is: its kernel with those opts
    const variant = /** @type {(TraceSummary & {origin: OptsOrigin}) | undefined} */ (this.traces.find((t) => t.id === s.tid && t.origin));
    if (variant) Object.assign(s, { tid: variant.origin.trace_id, ci: variant.origin.context, opts: variant.origin.opts });
    const own = this.traces.filter((t) => !t.origin);
    if (s.tid == null || !own.some((t) => t.id === s.tid)) {
      if (!own.length) return this.status("This server has no traces.");
      s.tid = own[0].id;
    }
    let trace;
    try {
      trace = await this.trace(s.tid);
    } catch (err) {
      return this.status(err.message, true);
    }
    if (token !== this.token) return;
    const ctxs = trace.contexts;
    if (!ctxs.length) return this.status(`Trace ${trace.name} has no contexts.`);
    if (s.ci == null || !ctxs[s.ci]) s.ci = openingKernel(ctxs);
    const ctx = ctxs[s.ci];
    if (ctx.kind !== "kernel") s.opts = null;

    // the context drawn: the kernel's own, or its lowering with the view's opts
    let shown = { trace, context: ctx };
    let variantError = null;
    if (s.opts) {
      try {
        const v = await this.variant(s.tid, s.ci, s.opts);
        const t = await this.trace(/** @type {string} */ (v.trace_id)); // the server keeps each lowering
        shown = { trace: t, context: t.contexts[0] };
        // the list now holds this variant
        if (!this.traces.some((x) => x.id === v.trace_id)) this.traces = await this.source.traces();
      } catch (err) {
        variantError = `The opts in this view do not apply: ${err.message}`;
      }
      if (token !== this.token) return;
    }
    /** @type {ContextInfo[]} */
    this.contexts = shown.trace.contexts;
    /** @type {{tid: string, ci: number, context: ContextInfo}} */
    this.shown = { tid: shown.trace.id, ci: shown.context.index, context: shown.context };
    s.pi = Math.min(Math.max(0, s.pi), shown.context.passes.length - 1);
    /** @type {PassInfo | undefined} */
    const pass = shown.context.passes[s.pi];
    /** @type {PassInfo | undefined} */
    this.pass = pass;
    s.k = Math.min(Math.max(0, s.k), pass?.steps ?? 0);
    if (!this.panels.has(s.tab)) s.tab = this.panelDefs[0].id;
    this.writeHash(push);
    this.onState({ ...s });

    this.sidebar.render(this.traces, trace, shown.context, s);
    this.renderChrome(trace, ctx, pass);
    const panel = /** @type {Panel} */ (this.panels.get(s.tab)); // (s.tab is a panel's)
    /** @type {PanelView} */
    const view = { trace, context: ctx, shown, pass, state: /** @type {ShownState} */ (s), step: null };
    panel.update(view);
    if (!pass) {
      /** @type {StepView | null} */
      this.step = null;
      this.showListing(false);
      this.view.draw({ key: "empty", root: null, nodes: [], edges: [], match: null, replacement: null, total: 0 }, { width: 0, height: 0, nodes: [], edges: [] }, false);
      return this.status("This context has no passes.");
    }

    this.status(variantError ?? "Loading…", variantError != null);
    /** @type {StepView} */
    let step;
    /** @type {Map<string, GraphNode> | null} */
    let removed = null;
    /** @type {[string, number, number]} */
    const at = [shown.trace.id, shown.context.index, s.pi];
    try {
      step = await this.stepData(...at, s.k);
      if (this.showRemoved && s.k > 0 && step.removed.length) removed = await this.removedNodes(at, s.k, step);
      if (token !== this.token) return;
      this.step = step;
      /** @type {Map<string, GraphNode>} */
      this.table = new Map([...(removed ?? []), ...step.nodes.map((n) => /** @type {[string, GraphNode]} */ ([n.id, n]))]);
      const listing = this.effective("listing") && linearOf(step);
      this.showListing(listing);
      this.renderTools(step);
      this.showFolded(step);
      const display = displayGraph(step, removed, {
        ...DEFAULT_OPTIONS,
        index: this.effective("index"),
        lanes: this.effective("lanes"),
        calls: this.effective("calls"),
        expanded: new Set(s.calls),
        kernels: this.kernelNames(shown.trace),
        hidden: this.views.hidden,
        commutative: new Set(this.meta.commutative ?? []),
      });
      /** @type {DisplayGraph} */
      this.display = display;
      this.els.drawn.textContent = `${display.nodes.length} drawn · ${display.total} nodes`;
      if (listing) {
        renderListing(this.els.listing, step, (op) => this.opColors.get(op), (id) => this.selectNode(id, false), this.selected);
        if (step.nodes.find((n) => n.id === step.root)?.op === "Program" && shown.context.kind === "kernel") this.showSource(token);
      }
      else {
        const layout = await this.layouts.layout(display);
        if (token !== this.token) return;
        const passKey = at.join("/");
        const fit = passKey !== this.drawnPass;
        this.drawnPass = passKey;
        if (!(await this.view.draw(display, layout, fit)) || token !== this.token) return;
        if ((s.query ?? "") !== this.query) this.els.search.value = s.query ?? ""; // a link's search
        if (this.query || s.query) this.search(s.query ?? "", false);
      }
    } catch (err) {
      if (token === this.token) this.status(err.message, true);
      return;
    }
    // the node in the view state stays selected; one that a link (or the history) names is brought into view
    const fresh = s.node != null && s.node !== this.selected;
    this.selectNode(s.node != null && this.table.has(s.node) ? s.node : null, fresh);
    panel.update({ ...view, step });
    if (!variantError) this.status("");
    // Report the view as drawn once the browser has painted it (tests and bench/ui.py wait for this).
    requestAnimationFrame(() => {
      if (token !== this.token) return;
      const drawn = `${s.tid}/${s.ci}/${s.pi}/${s.k}`;
      performance.measure(`uopviz:draw ${drawn}`, { start: started });
      this.root.dataset.drawn = drawn;
    });
  }

  // A rendered program's source above its listing (the step that rendered it shows what it wrote), from the kernel
  // view the Kernel tab reads too.
  /** @param {number} token the render it belongs to */
  async showSource(token) {
    const { tid, ci } = this.shown;
    const view = await this.fetch(`kernel/${tid}/${ci}`, () => this.source.kernel(tid, ci)).catch(() => null);
    if (token !== this.token || !view?.source) return;
    const pre = h("pre", { class: "uv-code uv-listing-source-text" });
    pre.innerHTML = highlight(view.source, "c");
    this.els.listing.querySelector(".uv-listing-head")?.after(h("details", { class: "uv-listing-source", open: true }, h("summary", {}, `The source this program renders to (${view.device ?? "its device"})`), pre));
  }

  // The listing replaces the graph, and with it the graph's legend (which would cover its lines).
  /** @param {unknown} on */
  showListing(on) {
    this.els.listing.hidden = !on;
    this.els.graph.hidden = Boolean(on);
    /** @type {HTMLElement} */ (this.els.graph.parentElement).classList.toggle("uv-listing-on", Boolean(on));
  }

  // The nodes a step removed come from the step's own table when it has them, else from the step before.
  /**
   * @param {[string, number, number]} at the trace, context and pass
   * @param {number} k
   * @param {StepView} step
   * @returns {Promise<Map<string, GraphNode>>}
   */
  async removedNodes(at, k, step) {
    const have = new Map(step.nodes.map((n) => [n.id, n]));
    if (step.removed.every((id) => have.has(id))) return new Map(step.removed.map((id) => [id, /** @type {GraphNode} */ (have.get(id))]));
    const before = await this.stepData(...at, k - 1);
    const prev = new Map(before.nodes.map((n) => [n.id, n]));
    return new Map(step.removed.filter((id) => have.has(id) || prev.has(id)).map((id) => [id, /** @type {GraphNode} */ (have.get(id) ?? prev.get(id))]));
  }

  /** @param {StepView} step */
  renderTools(step) {
    /** @type {(name: string, value: boolean) => void} */
    const on = (name, value) => this.toggles[name].classList.toggle("uv-on", value);
    on("removed", this.showRemoved);
    on("index", this.effective("index"));
    on("lanes", this.effective("lanes"));
    on("calls", this.effective("calls"));
    on("listing", Boolean(this.effective("listing") && linearOf(step)));
    on("filter", this.views.hidden.size > 0);
    this.toggles.listing.hidden = !linearOf(step);
  }

  /**
   * @param {TraceDetail} trace
   * @param {ContextInfo} ctx
   * @param {PassInfo | undefined} pass
   */
  renderChrome(trace, ctx, pass) {
    const s = this.state;
    fill(
      this.els.crumbs,
      h("span", {}, trace.name),
      h("span", { class: "uv-sep" }, "›"),
      ctx.kind === "kernel" ? kernelName(ctx.name, this.axisColors, ctx.label) : h("span", {}, ctx.label),
      s.opts && [h("span", { class: "uv-sep" }, "›"), h("span", { class: "uv-crumb-opts", title: "lowered again with these opts" }, describeOpts(this.meta, s.opts))],
      pass && [h("span", { class: "uv-sep" }, "›"), h("span", {}, pass.name)],
    );
    const steps = pass?.steps ?? 0;
    this.els.stepLabel.textContent = `step ${s.k} / ${steps}`;
    this.els.stepLabel.title = "";
    delete this.els.stepLabel.dataset.folded;
    Object.assign(this.els.slider, { max: steps, value: s.k, disabled: !steps });
    fill(
      this.els.tabs,
      this.panelDefs.map(({ id, title }) => h("button", { class: `uv-tab${id === s.tab ? " uv-active" : ""}`, dataset: { tab: id }, onclick: () => this.go({ tab: id }) }, title)),
    );
    for (const [id, body] of this.els.tabBodies) body.hidden = id !== s.tab;
  }

  /**
   * @param {string | null} ref
   * @param {boolean} reveal
   */
  selectNode(ref, reveal) {
    this.selected = ref;
    if (this.state.node !== ref) {
      this.state.node = ref; // in the URL, so a link opens on it
      this.writeHash(false);
    }
    this.view.select(ref, reveal);
    for (const line of /** @type {NodeListOf<HTMLElement>} */ (this.els.listing.querySelectorAll(".uv-line"))) {
      line.classList.toggle("uv-selected", line.dataset.ref === ref);
      if (line.dataset.ref === ref) line.closest("details")?.setAttribute("open", ""); // a run holding it opens
    }
    const drawn = ref == null ? null : this.view.nodes.find((n) => n.refs.includes(ref));
    renderInspector(this.els.inspector, {
      node: ref && this.table?.get(ref),
      drawn,
      table: this.table,
      select: (id) => this.selectNode(id, true),
      openers: (n) => this.openersOf(n),
      python: this.readOnly ? null : (id) => this.showPython(id),
    });
  }

  // The graph of the step shown (or the part of it under node `id`) as Python, in an overlay.
  /** @param {string | null} [id] */
  async showPython(id = null) {
    const { pi, k } = this.state;
    try {
      const { text } = await this.source.python(this.shown.tid, this.shown.ci, pi, k, id);
      this.overlay.text(id ? `Python: the graph under ${id.slice(0, 8)}` : "Python: the graph of this step", text);
    } catch (err) {
      this.status(err.message, true);
    }
  }

  // The kernels of the trace shown, by their body's node id (its schedule's Calls are titled with them), kept per trace.
  /** @param {TraceDetail} trace */
  kernelNames(trace) {
    if (this.kernelsOf?.trace === trace) return this.kernelsOf.names;
    const names = kernelsByBody(trace.contexts);
    this.kernelsOf = { trace, names };
    return names;
  }

  // A called function (a Call of a Function, or the Function itself) opens the context its body was scheduled in;
  // a kernel's Call drawn as a box draws its kernel in place (and folds it again), one Call at a time, and opens the
  // kernel's own context where the trace lowered it.
  /**
   * @param {GraphNode} node
   * @returns {{label: string, open: () => void}[]}
   */
  openersOf(node) {
    const fn = node.op === "Call" ? this.table?.get(node.src[0]) : node;
    if (node.op === "Call" && fn?.op !== "Function" && node.src.length > 1) {
      const kernel = this.shown && this.kernelsOf?.trace.id === this.shown.tid ? this.kernelsOf.names.get(node.src[0]) : undefined;
      const out = kernel ? [{ label: `open kernel ${kernel.label}`, open: () => this.go({ ci: kernel.index, pi: 0, k: 0, opts: null }, true) }] : [];
      if (!this.effective("calls")) return out;
      const calls = this.state.calls;
      const open = calls.includes(node.id);
      return [
        {
          label: open ? "fold its kernel" : "draw its kernel here",
          open: () => {
            // in the URL, so a link (or a reload) opens the same Calls
            this.state.calls = open ? calls.filter((id) => id !== node.id) : [...calls, node.id];
            this.render().then(() => this.selectNode(node.id, true)); // the Call, its kernel now above it, in view
          },
        },
        ...out,
      ];
    }
    if (fn?.op !== "Function" || !fn.arg) return [];
    const ci = (this.contexts ?? []).findIndex((c) => c.kind === "function" && c.name === `function ${fn.arg}`);
    return ci < 0 ? [] : [{ label: `open function ${fn.arg}`, open: () => this.go({ ci, pi: 0, k: 0, opts: null }, true) }];
  }


  // The search box: every drawn node whose op, title, index text or id holds the text is marked; the first (or
  // the next, with Enter) is brought into view.
  /**
   * @param {string} query
   * @param {boolean} [reveal]
   */
  search(query, reveal = true) {
    this.query = query.trim().toLowerCase();
    if ((this.state.query ?? "") !== this.query) {
      this.state.query = this.query || null; // in the URL, so a link opens with it
      this.writeHash(false);
    }
    const nodes = this.view.nodes;
    this.hits = this.query ? nodes.flatMap((n, i) => (searchText(n).includes(this.query) ? [i] : [])) : [];
    this.view.search(this.hits);
    this.hit = -1;
    if (reveal && this.hits.length) this.nextHit(1);
    this.showHits();
  }

  /** @param {number} delta */
  nextHit(delta) {
    if (!this.hits.length) return;
    this.hit = (this.hit + delta + this.hits.length) % this.hits.length;
    this.view.reveal(this.hits[this.hit]);
    this.showHits();
  }

  showHits() {
    this.els.hits.textContent = this.query ? (this.hits.length ? `${this.hit + 1} / ${this.hits.length}` : "none") : "";
  }

  // The pass's folded steps come with its steps (the trace's outline would have to replay every pass to list them).
  /** @param {StepView} step */
  showFolded(step) {
    const folded = step.folded.length;
    this.els.stepLabel.title = folded ? `${folded} of these steps change nothing drawn (the rewriter met a node an earlier step had rewritten): ← → skip them` : "";
    this.els.stepLabel.dataset.folded = String(folded);
    this.els.stepLabel.querySelector(".uv-folded")?.remove();
    if (folded) this.els.stepLabel.append(h("span", { class: "uv-folded" }, ` · ${folded} folded`));
  }

  // The next step that is not folded (one that changes what is drawn), `delta` away; nothing happens at either end.
  /** @param {number} delta */
  async stepBy(delta) {
    const { tid, pi } = this.state;
    const pass = this.pass;
    if (!pass) return;
    const shown = this.shown && (await this.stepData(this.shown.tid, this.shown.ci, pi, this.state.k).catch(() => null));
    const folded = new Set(shown?.folded);
    let k = this.state.k + delta;
    while (k > 0 && k < pass.steps && folded.has(k)) k += delta;
    k = Math.min(Math.max(0, k), pass.steps);
    if (k !== this.state.k && tid === this.state.tid && pi === this.state.pi) this.go({ k });
  }

  // Step k of the current pass (clamped to its steps).
  /** @param {number} k */
  stepTo(k) {
    const pass = this.pass;
    if (!pass) return;
    k = Math.min(Math.max(0, k), pass.steps);
    if (k !== this.state.k) this.go({ k });
  }

  /** @param {number} delta */
  movePass(delta) {
    const passes = this.shown?.context.passes ?? [];
    const pi = Math.min(Math.max(0, this.state.pi + delta), passes.length - 1);
    if (pi !== this.state.pi) this.go({ pi, k: 0 });
  }

  /** @param {KeyboardEvent} e */
  onKey(e) {
    if (/** @type {Element} */ (e.target).closest("input, select, textarea, [contenteditable]") || e.altKey || e.ctrlKey || e.metaKey) return;
    if (this.overlay.open) {
      if (e.key === "Escape" || e.key === "?") {
        e.preventDefault();
        this.overlay.close();
      }
      return;
    }
    /** @type {Record<string, () => unknown>} */
    const actions = {
      ArrowLeft: () => this.stepBy(-1),
      ArrowRight: () => this.stepBy(1),
      ArrowUp: () => this.movePass(-1),
      ArrowDown: () => this.movePass(1),
      Home: () => this.stepTo(0),
      End: () => this.stepTo(Infinity),
      Escape: () => this.selectNode(null, false),
      "/": () => this.els.search.focus(),
      "?": () => this.overlay.help(),
      f: () => this.view.fit(),
      g: () => linearOf(this.step ?? { nodes: [] }) && this.flip("listing"),
      i: () => this.flip("index"),
      c: () => this.flip("lanes"),
      k: () => this.flip("calls"),
      l: () => /** @type {HTMLElement} */ (this.els.legend.querySelector(".uv-legend-toggle")).click(),
      b: () => this.foldSide(),
    };
    if (!actions[e.key]) return;
    e.preventDefault();
    actions[e.key]();
  }
}
