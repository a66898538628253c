// The application: page layout, the view state, and navigation. It reads all data through the data source given
// to mount() (see data.js), so it runs the same over HTTP, a widget comm, or data inlined in a static page. The
// side panel's tabs are the panels it is given (panels/registry.js). On the web page the view state lives in the
// URL hash; in a notebook widget (hash: false) nothing is global: no hash, no document-level listener.
import { fill, h, icon } from "./dom.js";
import { displayGraph } from "./graph/display.js";
import { renderInspector } from "./graph/inspector.js";
import { LayoutEngine } from "./graph/layout.js";
import { legend } from "./graph/legend.js";
import { GraphView } from "./graph/view.js";
import { kernelName } from "./names.js";
import { Sidebar } from "./sidebar.js";
import { emptyState, formatHash, parseHash } from "./state.js";

const ICONS = { first: "M3 3h2v10H3zM13 3v10L6 8z", prev: "M11 3v10L4 8z", next: "M5 3v10l7-5z", last: "M11 3h2v10h-2zM3 3v10l7-5z" };

export class App {
  // options: hash (keep the view in location.hash), createWorker (the layout worker), panels (the side panel's
  // tabs), readOnly (a source that changes nothing), initial (a view state to start from, without hash),
  // onState(state) (told the view state after each change, e.g. a widget's traitlets).
  constructor(root, source, { hash, createWorker, panels, readOnly = false, initial = {}, onState = () => {} }) {
    this.root = root;
    this.source = source;
    this.useHash = hash;
    this.panelDefs = panels;
    this.readOnly = readOnly;
    this.onState = onState;
    this.layouts = new LayoutEngine(createWorker);
    this.cache = new Map(); // data-source answers by request key, as promises
    this.state = { ...emptyState(), ...initial };
    this.token = 0;
    this.showRemoved = true;
    this.selected = null;
    this.drawnPass = null;
    this.panels = new Map(); // id -> the panel's instance
    this.cleanups = [];
  }

  async start() {
    this.buildLayout();
    this.status("Loading…");
    try {
      [this.meta, this.traces] = await Promise.all([this.source.meta(), this.source.traces()]);
    } catch (err) {
      this.status(err.message, true);
      return;
    }
    if (this.useHash) this.state = this.fromHash();
    this.axisColors = new Map(this.meta.axis_types.map((t) => [t.letter, t.color]));
    this.sidebar = new Sidebar(this.els.side, this.axisColors, (patch, push) => this.go(patch, push));
    const ctx = {
      meta: this.meta,
      axisColors: this.axisColors,
      source: this.source,
      readOnly: this.readOnly,
      fetch: (key, load) => this.fetch(key, load),
      go: (patch, push) => this.go(patch, push),
      state: () => this.state,
      selectNode: (id) => this.selectNode(id, true),
    };
    for (const p of this.panelDefs) this.panels.set(p.id, p.create(this.els.tabBodies.get(p.id), ctx));
    this.els.legend.replaceWith((this.els.legend = legend(this.meta)));
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

  listen(target, type, fn) {
    target.addEventListener(type, fn);
    this.cleanups.push(() => target.removeEventListener(type, fn));
  }

  buildLayout() {
    const el = (tag, cls, ...children) => h(tag, { class: cls }, ...children);
    const els = {
      side: el("nav", "uv-side"),
      crumbs: el("div", "uv-crumbs"),
      status: el("div", "uv-status"),
      stepLabel: el("span", "uv-step-label"),
      slider: h("input", { class: "uv-slider", type: "range", min: 0, max: 0, value: 0, "aria-label": "step", oninput: (e) => this.go({ k: Number(e.target.value) }) }),
      graph: el("div", "uv-graph"),
      inspector: h("div", { class: "uv-inspector", hidden: true }),
      legend: el("div", "uv-legend"),
      tabs: el("div", "uv-tabs"),
      tabBodies: new Map(this.panelDefs.map((p) => [p.id, el("div", `uv-tab-body uv-${p.id}`)])),
    };
    this.els = els;
    const button = (cls, label, title, onclick) => h("button", { class: `uv-button ${cls}`, title, onclick }, label);
    const removedToggle = button("uv-toggle uv-on", "removed", "draw the nodes this step removed", () => {
      this.showRemoved = !this.showRemoved;
      removedToggle.classList.toggle("uv-on", this.showRemoved);
      this.render();
    });
    this.root.classList.add("uv-app");
    this.root.tabIndex = 0;
    fill(
      this.root,
      h(
        "header",
        { class: "uv-top" },
        el("div", "uv-brand", "uopviz"),
        els.crumbs,
        h(
          "div",
          { class: "uv-stepper" },
          button("uv-first", icon(ICONS.first), "first step (Home)", () => this.stepTo(0)),
          button("uv-prev", icon(ICONS.prev), "previous step (←)", () => this.stepTo(this.state.k - 1)),
          els.stepLabel,
          button("uv-next", icon(ICONS.next), "next step (→)", () => this.stepTo(this.state.k + 1)),
          button("uv-last", icon(ICONS.last), "last step (End)", () => this.stepTo(Infinity)),
          els.slider,
        ),
        els.status,
      ),
      els.side,
      this.resizer("--uv-side-w", 1),
      h(
        "main",
        { class: "uv-main" },
        els.graph,
        h("div", { class: "uv-graph-tools" }, button("uv-fit", "fit", "frame the whole graph", () => this.view.fit()), removedToggle),
        els.inspector,
        els.legend,
      ),
      this.resizer("--uv-panel-w", -1),
      h("aside", { class: "uv-panel" }, els.tabs, [...els.tabBodies.values()]),
    );
    this.view = new GraphView(els.graph, (ref) => this.selectNode(ref, false));
    this.listen(this.root, "keydown", (e) => {
      this.onKey(e);
      // In a notebook the keys typed in the view are the view's: none reaches JupyterLab's shortcuts (a cell's
      // arrows, "a", "b", ...); combinations with Ctrl/Alt/Meta (save, run) still do.
      if (!this.useHash && !(e.altKey || e.ctrlKey || e.metaKey)) e.stopPropagation();
    });
    // The page of its own takes the keyboard at once; in a notebook a click into the view gives it the keys.
    if (this.useHash) this.root.focus({ preventScroll: true });
  }

  // A drag handle that resizes the column whose width is in CSS variable `name` (sign: which side grows).
  resizer(name, sign) {
    const handle = h("div", { class: `uv-resizer ${sign > 0 ? "uv-resizer-side" : "uv-resizer-panel"}`, role: "separator" });
    handle.addEventListener("pointerdown", (down) => {
      const start = parseFloat(getComputedStyle(this.root).getPropertyValue(name));
      handle.setPointerCapture(down.pointerId);
      const move = (e) => this.root.style.setProperty(name, `${Math.max(160, Math.min(900, start + sign * (e.clientX - down.clientX)))}px`);
      handle.addEventListener("pointermove", move);
      handle.addEventListener("pointerup", () => handle.removeEventListener("pointermove", move), { once: true });
    });
    return handle;
  }

  status(text, isError = false) {
    this.els.status.textContent = text;
    this.els.status.classList.toggle("uv-error", isError);
  }

  // Data-source answers are cached by key (as promises); failed ones are forgotten so they can be retried.
  fetch(key, load) {
    if (!this.cache.has(key)) {
      const promise = load();
      promise.catch(() => this.cache.delete(key));
      this.cache.set(key, promise);
    }
    return this.cache.get(key);
  }

  trace = (tid) => this.fetch(`trace/${tid}`, () => this.source.trace(tid));
  stepData = (s, k) => this.fetch(`step/${s.tid}/${s.ci}/${s.pi}/${k}`, () => this.source.step(s.tid, s.ci, s.pi, k));

  go(patch, push = false) {
    this.state = { ...this.state, ...patch };
    this.render(push);
  }

  onHash() {
    if (location.hash !== formatHash(this.state)) {
      this.state = this.fromHash();
      this.render();
    }
  }

  writeHash(push) {
    if (!this.useHash) return;
    const hash = formatHash(this.state);
    if (hash !== location.hash) history[push ? "pushState" : "replaceState"](null, "", hash || location.pathname + location.search);
  }

  // Brings the page in line with this.state, fetching what it needs; a newer call supersedes an older one.
  async render(push = false) {
    const token = ++this.token;
    const started = performance.now();
    const s = this.state;
    if (s.tid != null && !this.traces.some((t) => t.id === s.tid)) {
      // a trace recorded since the list was read (opts make new ones), or a stale link
      try {
        this.traces = await this.source.traces();
      } catch (err) {
        return this.status(err.message, true);
      }
      if (token !== this.token) return;
    }
    if (s.tid == null || !this.traces.some((t) => t.id === s.tid)) {
      if (!this.traces.length) return this.status("This server has no traces.");
      s.tid = this.traces[0].id;
    }
    let trace;
    try {
      trace = await this.trace(s.tid);
    } catch (err) {
      return this.status(err.message, true);
    }
    if (token !== this.token) return;
    const ctxs = trace.contexts;
    this.contexts = ctxs;
    if (!ctxs.length) return this.status(`Trace ${trace.name} has no contexts.`);
    if (s.ci == null || !ctxs[s.ci]) s.ci = Math.max(0, ctxs.findIndex((c) => c.kind === "kernel"));
    const ctx = ctxs[s.ci];
    s.pi = Math.min(Math.max(0, s.pi), ctx.passes.length - 1);
    const pass = ctx.passes[s.pi];
    s.k = Math.min(Math.max(0, s.k), pass?.steps ?? 0);
    if (!this.panels.has(s.tab)) s.tab = this.panelDefs[0].id;
    this.writeHash(push);
    this.onState({ ...s });

    this.sidebar.render(this.traces, trace, s);
    this.renderChrome(trace, ctx, pass);
    const panel = this.panels.get(s.tab);
    const view = { trace, context: ctx, pass, state: s, step: null };
    panel.update(view);
    if (!pass) {
      this.view.draw({ key: "empty", nodes: [], edges: [] }, { width: 0, height: 0, nodes: [], edges: [] }, false);
      return this.status("This context has no passes.");
    }

    this.status("Loading…");
    let step;
    let removed = null;
    try {
      step = await this.stepData(s, s.k);
      if (this.showRemoved && s.k > 0 && step.removed.length) removed = await this.removedNodes(s, step);
      if (token !== this.token) return;
      const display = displayGraph(step, removed);
      const layout = await this.layouts.layout(display);
      if (token !== this.token) return;
      const passKey = `${s.tid}/${s.ci}/${s.pi}`;
      const fit = passKey !== this.drawnPass;
      this.drawnPass = passKey;
      if (!(await this.view.draw(display, layout, fit)) || token !== this.token) return;
    } catch (err) {
      if (token === this.token) this.status(err.message, true);
      return;
    }
    this.table = new Map([...(removed ?? []), ...step.nodes.map((n) => [n.id, n])]);
    this.selectNode(this.table.has(this.selected) ? this.selected : null, false);
    panel.update({ ...view, step });
    this.status("");
    // Report the view as drawn once the browser has painted it (tests and bench/ui.py wait for this).
    requestAnimationFrame(() => {
      if (token !== this.token) return;
      const view = `${s.tid}/${s.ci}/${s.pi}/${s.k}`;
      performance.measure(`uopviz:draw ${view}`, { start: started });
      this.root.dataset.drawn = view;
    });
  }

  // The nodes a step removed come from the step's own table when it has them, else from the step before.
  async removedNodes(s, step) {
    const have = new Map(step.nodes.map((n) => [n.id, n]));
    if (step.removed.every((id) => have.has(id))) return new Map(step.removed.map((id) => [id, have.get(id)]));
    const before = await this.stepData(s, s.k - 1);
    const prev = new Map(before.nodes.map((n) => [n.id, n]));
    return new Map(step.removed.filter((id) => have.has(id) || prev.has(id)).map((id) => [id, have.get(id) ?? prev.get(id)]));
  }

  renderChrome(trace, ctx, pass) {
    const s = this.state;
    fill(
      this.els.crumbs,
      h("span", {}, trace.name),
      h("span", { class: "uv-sep" }, "›"),
      ctx.kind === "kernel" ? kernelName(ctx.name, this.axisColors) : h("span", {}, ctx.name),
      pass && [h("span", { class: "uv-sep" }, "›"), h("span", {}, pass.name)],
    );
    const steps = pass?.steps ?? 0;
    this.els.stepLabel.textContent = `step ${s.k} / ${steps}`;
    Object.assign(this.els.slider, { max: steps, value: s.k, disabled: !steps });
    fill(
      this.els.tabs,
      this.panelDefs.map(({ id, title }) => h("button", { class: `uv-tab${id === s.tab ? " uv-active" : ""}`, dataset: { tab: id }, onclick: () => this.go({ tab: id }) }, title)),
    );
    for (const [id, body] of this.els.tabBodies) body.hidden = id !== s.tab;
  }

  selectNode(ref, reveal) {
    this.selected = ref;
    this.view.select(ref, reveal);
    renderInspector(this.els.inspector, ref && this.table?.get(ref), this.table, (id) => this.selectNode(id, true), (n) => this.functionOf(n));
  }

  // A called function (a Call of a Function, or the Function itself) opens the context its body was scheduled in.
  functionOf(node) {
    const fn = node.op === "Call" ? this.table?.get(node.src[0]) : node;
    if (fn?.op !== "Function" || !fn.arg) return null;
    const ci = (this.contexts ?? []).findIndex((c) => c.kind === "function" && c.name === `function ${fn.arg}`);
    return ci < 0 ? null : { label: `open function ${fn.arg}`, open: () => this.go({ ci, pi: 0, k: 0 }, true) };
  }

  // Step k of the current pass (clamped to its steps); nothing happens at either end.
  async stepTo(k) {
    const { tid, ci, pi } = this.state;
    const steps = (await this.trace(tid)).contexts[ci].passes[pi].steps;
    k = Math.min(Math.max(0, k), steps);
    if (k !== this.state.k && tid === this.state.tid && pi === this.state.pi) this.go({ k });
  }

  async movePass(delta) {
    const { tid, ci } = this.state;
    const passes = (await this.trace(tid)).contexts[ci].passes;
    const pi = Math.min(Math.max(0, this.state.pi + delta), passes.length - 1);
    if (pi !== this.state.pi && tid === this.state.tid) this.go({ pi, k: 0 });
  }

  onKey(e) {
    if (e.target.closest("input, select, textarea, [contenteditable]") || e.altKey || e.ctrlKey || e.metaKey) return;
    const actions = {
      ArrowLeft: () => this.stepTo(this.state.k - 1),
      ArrowRight: () => this.stepTo(this.state.k + 1),
      ArrowUp: () => this.movePass(-1),
      ArrowDown: () => this.movePass(1),
      Home: () => this.stepTo(0),
      End: () => this.stepTo(Infinity),
      Escape: () => this.selectNode(null, false),
    };
    if (!actions[e.key]) return;
    e.preventDefault();
    actions[e.key]();
  }
}
