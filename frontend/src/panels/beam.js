// The BEAM tab: start a BEAM search of the kernel shown (a width and a number of rounds) and follow it live;
// browse the searches in the tuning database. A search is drawn as candidate times per round with its winning
// path, whose candidates are listed step by step with their full opts (the heuristic's kernel named as such), times,
// GFLOP/s and GB/s, and can be opened in the Kernel tab.
import { fill, h } from "../dom.js";
import { kernelName } from "../names.js";
import { describeOpt, describeOpts } from "../opts.js";
import { beamChart, candidateKind, formatSeconds } from "./beam-chart.js";
import { speedText } from "./kernel.js";
/** @import { CandidateView, ContextInfo, DoneEvent, Opt, ResultView, SearchDetail, SearchStatus, SearchSummary, BeamEvent, DataSource, Meta, Work } from "../../types/api" */
/** @import { PanelContext, PanelDef, PanelView, ViewState } from "../../types/ui" */
/**
 * A candidate as the tab knows it: one reported live has no program, compile time or machines yet.
 * @typedef {Omit<CandidateView, "program_hash" | "uop_count" | "compile_s" | "built_on" | "measured_on">
 *   & Partial<Pick<CandidateView, "program_hash" | "uop_count" | "compile_s" | "built_on" | "measured_on">>} Candidate
 */
/** @typedef {Candidate & {median_s: number}} TimedCandidate */
/**
 * The search shown: the database's account, with what a search followed live has reported since.
 * @typedef {object} SearchShown
 * @property {number} id
 * @property {string} kernel_name
 * @property {string | null} kernel_hash
 * @property {string} device
 * @property {number | null} width
 * @property {string | null} error
 * @property {SearchStatus} status
 * @property {Candidate[]} candidates
 * @property {number | null} best_id
 * @property {number | null} best_s
 * @property {number[]} winning_path
 * @property {number | null} unoptimized_s
 */
/**
 * A search this page follows live (its progress events so far).
 * @typedef {object} Live
 * @property {string} job
 * @property {number} sid
 * @property {Map<number, Candidate>} candidates
 * @property {number} round
 * @property {number} inRound candidates of the round so far
 * @property {number} measured
 * @property {"running" | "done" | "error"} state
 * @property {string | null} message
 * @property {DoneEvent | null} done
 * @property {string | null} [executor]
 * @property {() => void} close stops following it
 */

/** @type {Record<"width" | "rounds", [number, number]>} */
const LIMITS = { width: [1, 16], rounds: [1, 16] }; // as the server checks them

// The chain of candidates from the unoptimized kernel to `bestId`, each the parent of the next.
/**
 * @param {Pick<Candidate, "id" | "parent">[]} candidates
 * @param {number | null | undefined} bestId
 * @returns {number[]}
 */
export function pathTo(candidates, bestId) {
  const byId = new Map(candidates.map((c) => [c.id, c]));
  /** @type {number[]} */
  const path = [];
  for (let c = byId.get(/** @type {number} */ (bestId)); c && !path.includes(c.id); c = byId.get(/** @type {number} */ (c.parent))) path.unshift(c.id);
  return path;
}

/**
 * @param {Candidate} c
 * @returns {c is TimedCandidate}
 */
export const timed = (c) => c.error == null && c.median_s != null;

// Where a live search runs (its start event's executor, e.g. a Ray cluster) and on how many machines it has timed.
/**
 * @param {string | null | undefined} executor
 * @param {Pick<Candidate, "measured_on">[]} candidates
 */
export function whereLine(executor, candidates) {
  const machines = new Set(candidates.map((c) => c.measured_on).filter((m) => m != null)).size;
  return executor ? ` · ${executor}${machines > 1 ? `, timed on ${machines} machines` : ""}` : "";
}

/** @type {Record<string, string>} */
const KIND_TITLES = {
  unoptimized: "the kernel without opts",
  heuristic: "the hand-written heuristic's opts, all at once",
  "re-timed": "the final check: its parent timed again, in turns with the other contenders and with more runs",
};

// The pill that names a candidate's kind (none for an ordinary step).
/** @param {string} kind */
const kindPill = (kind) => kind !== "step" && h("span", { class: `uv-beam-kind uv-beam-kind-${kind.replace(/\W/g, "")}`, title: KIND_TITLES[kind] }, kind);

/** @param {number} t Unix time */
function ago(t) {
  const s = Date.now() / 1000 - t;
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(t * 1000).toLocaleDateString();
}

/** @type {PanelDef} */
export const beamPanel = {
  id: "beam",
  title: "BEAM",
  create: (el, ctx) => new BeamPanel(el, ctx),
};

class BeamPanel {
  /**
   * @param {HTMLElement} el
   * @param {PanelContext} ctx
   */
  constructor(el, ctx) {
    this.el = el;
    this.ctx = ctx;
    this.source = ctx.source;
    this.meta = ctx.meta;
    this.axisColors = ctx.axisColors;
    this.go = ctx.go;
    this.form = { width: 2, rounds: 8 };
    this.all = false; // list every kernel's searches, not only this kernel's
    /** @type {string | null} */
    this.key = null; // trace/context/all whose list is loaded
    /** @type {number | null | undefined} */
    this.sid = undefined; // the search shown (the view state's)
    /** @type {SearchSummary[] | null} */
    this.list = null; // the searches listed so far (pages of them, newest first)
    /** @type {number | null} */
    this.next = null; // the cursor of the next page (null: no more)
    /** @type {string | null} */
    this.moreError = null;
    /** @type {ResultView[]} */
    this.results = [];
    /** @type {string | null} */
    this.listError = null;
    /** @type {SearchDetail | null} */
    this.detail = null;
    /** @type {string | null} */
    this.detailError = null;
    /** @type {Live | null} */
    this.live = null; // the search this page started or found running: its events so far
    /** @type {number | null} */
    this.picked = null; // a candidate clicked in the chart
    /** @type {string | null} */
    this.startError = null;
    this.starting = false;
    this.frame = 0;
    /** @type {string | null} */
    this.workHash = null; // the kernel whose work `work` is
  }

  destroy() {
    this.live?.close();
    cancelAnimationFrame(this.frame);
  }

  // Called whenever the app renders with this tab open; reloads only what the kernel or search changed.
  /** @param {PanelView} view */
  update({ trace, context, state }) {
    /** @type {string} */
    this.tid = trace.id;
    /** @type {ContextInfo} */
    this.context = context;
    this.loadWork();
    const changed = this.listKey() !== this.key || state.search !== this.sid;
    if (this.listKey() !== this.key) this.loadList();
    if (state.search !== this.sid) {
      this.sid = state.search;
      this.picked = null;
      this.loadSearch();
    }
    if (changed) this.render();
  }

  // The kernel's work (flops, bytes), for GFLOP/s and GB/s beside the times of its searches.
  async loadWork() {
    const [tid, ci] = [this.tid, this.context.index];
    if (this.context.kind !== "kernel" || this.workKey === `${tid}/${ci}`) return;
    /** @type {string | undefined} */
    this.workKey = `${tid}/${ci}`;
    /** @type {Work | null} */
    this.work = null;
    try {
      const kernel = await this.ctx.fetch(`kernel/${tid}/${ci}`, () => this.source.kernel(tid, ci));
      if (this.workKey === `${tid}/${ci}`) [this.work, this.workHash] = [kernel.work, this.context.kernel_hash];
    } catch {
      return; // a kernel that did not render: times alone
    }
    this.render();
  }

  // A time with GFLOP/s and GB/s when the search is of the kernel shown (whose work is known).
  /**
   * @param {{kernel_hash: string | null}} s a search
   * @param {number | null} time
   */
  speed(s, time) {
    if (time == null) return "–";
    return this.work && s.kernel_hash === this.workHash ? speedText(time, this.work) : formatSeconds(time);
  }

  listKey() {
    return `${this.tid}/${this.context.index}/${this.all}`;
  }

  kernelHash() {
    return this.context.kind === "kernel" ? this.context.kernel_hash : null;
  }

  async loadList() {
    const key = (this.key = this.listKey());
    const hash = this.all ? null : this.kernelHash();
    try {
      const [page, results] = await Promise.all([this.source.searches(hash), hash ? this.source.results(hash) : []]);
      if (key !== this.key) return;
      [this.list, this.next, this.results, this.listError, this.moreError] = [page.searches, page.next_before, results, null, null];
    } catch (err) {
      if (key !== this.key) return;
      [this.list, this.next, this.results, this.listError] = [null, null, [], err.message];
    }
    this.render();
  }

  // The next page of the list, after those shown (the list reloads from its first page when a search changes).
  async loadMore() {
    const [key, list] = [this.key, this.list];
    try {
      const page = await this.source.searches(this.all ? null : this.kernelHash(), this.next);
      if (key !== this.key || list !== this.list) return;
      [this.list, this.next, this.moreError] = [[.../** @type {SearchSummary[]} */ (list), ...page.searches], page.next_before, null]; // (a list is shown)
    } catch (err) {
      if (key !== this.key || list !== this.list) return;
      this.moreError = err.message;
    }
    this.render();
  }

  async loadSearch() {
    const sid = this.sid;
    if (sid == null) {
      [this.detail, this.detailError] = [null, null];
      return;
    }
    try {
      const detail = await this.source.search(sid);
      if (sid !== this.sid) return;
      [this.detail, this.detailError] = [detail, null];
      if (detail.job && detail.job !== this.live?.job) this.follow(detail.job, sid); // running: follow it
    } catch (err) {
      if (sid !== this.sid) return;
      [this.detail, this.detailError] = [null, err.message];
    }
    this.render();
  }

  async start() {
    [this.starting, this.startError] = [true, null];
    this.render();
    try {
      const { job, search_id: sid } = await this.source.startBeam(this.tid, this.context.index, this.form.width, this.form.rounds);
      this.follow(job, sid);
      this.go({ search: sid }, true);
      this.loadList(); // with the new search in it
    } catch (err) {
      this.startError = err.message;
    }
    this.starting = false;
    this.render();
  }

  /**
   * @param {string} job
   * @param {number} sid
   */
  follow(job, sid) {
    this.live?.close();
    const live = /** @type {Live} */ ({ job, sid, candidates: new Map(), round: 0, inRound: 0, measured: 0, state: "running", message: null, done: null }); // close follows
    this.live = live;
    live.close = this.source.beamEvents(job, (event) => this.onEvent(live, event));
  }

  /**
   * @param {Live} live
   * @param {BeamEvent} e
   */
  onEvent(live, e) {
    if (live !== this.live) return;
    if (e.event === "start") live.executor = e.executor;
    else if (e.event === "round") [live.round, live.inRound, live.measured] = [e.round, e.candidates, e.measured];
    else if (e.event === "round_end") this.loadList(); // the list's best time and count
    else if (e.event === "candidate") {
      live.candidates.set(e.id, { id: e.id, parent: e.parent, round: e.round, opts: e.opts, median_s: e.time_s, error: e.error, duplicate: e.duplicate, samples: [], built_on: e.built_on, measured_on: e.measured_on });
      if (e.measured) live.measured++;
    } else if (e.event === "done" || e.event === "error") {
      [live.state, live.done, live.message] = [e.event, e.event === "done" ? e : null, e.event === "error" ? e.detail : null];
      this.refresh();
    }
    this.scheduleRender();
  }

  // After a search ends: the database's account of it, and the list with its final status.
  refresh() {
    this.loadList();
    if (this.sid != null) this.loadSearch();
  }

  scheduleRender() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  // The search shown: the database's account, with the candidates a search followed live has reported since.
  // While it runs, its best is the fastest verified candidate (ties go to the earlier one); once it has ended, the
  // database's winner, which the final check chose (a candidate's time in its round may have been luck).
  /** @returns {SearchShown | null} */
  view() {
    const live = this.live?.sid === this.sid ? this.live : null;
    const d = this.detail;
    if (!live || (live.state !== "running" && d && d.status !== "running")) return d;
    const byId = new Map(live.candidates);
    for (const c of d?.candidates ?? []) byId.set(c.id, c); // the database's account has the samples
    const candidates = [...byId.values()].sort((a, b) => a.round - b.round || a.id - b.id);
    const best = candidates.filter(timed).reduce((b, c) => (b && b.median_s <= c.median_s ? b : c), /** @type {TimedCandidate | null} */ (null));
    return {
      ...(d ?? { id: /** @type {number} */ (this.sid), kernel_name: "", kernel_hash: this.kernelHash(), device: "", width: null, error: null }),
      status: live.state === "running" ? "running" : (d?.status ?? "done"),
      candidates,
      best_id: best?.id ?? null,
      best_s: best?.median_s ?? null,
      winning_path: pathTo(candidates, best?.id),
      unoptimized_s: d?.unoptimized_s ?? candidates.find((c) => c.parent == null && timed(c))?.median_s ?? null,
    };
  }

  render() {
    if (!this.context) return;
    const isKernel = this.context.kind === "kernel";
    fill(
      this.el,
      h("div", { class: "uv-section-title" }, "BEAM search", isKernel && kernelName(this.context.name, this.axisColors)),
      this.ctx.readOnly ? null : isKernel ? this.renderForm() : h("p", { class: "uv-hint" }, "BEAM searches are per kernel: pick a kernel context to search it. Every search in the database is listed below."),
      this.renderLive(),
      this.renderSearch(),
      this.renderList(),
    );
  }

  renderForm() {
    const running = this.live?.state === "running";
    /** @type {(key: "width" | "rounds", label: string, title: string) => HTMLElement} */
    const number = (key, label, title) =>
      h(
        "label",
        { class: "uv-beam-field", title },
        label,
        h("input", {
          class: `uv-beam-${key}`,
          type: "number",
          min: LIMITS[key][0],
          max: LIMITS[key][1],
          value: this.form[key],
          oninput: (/** @type {{target: HTMLInputElement}} */ e) => (this.form[key] = Number(e.target.value)),
        }),
      );
    return [
      h(
        "form",
        {
          class: "uv-beam-form",
          onsubmit: (/** @type {SubmitEvent} */ event) => {
            event.preventDefault();
            this.start();
          },
        },
        number("width", "width", "how many of a round's fastest kernels the next round extends"),
        number("rounds", "rounds", "the most rounds after round 0 (it stops early when a round gains under 1%)"),
        h("button", { class: "uv-button uv-primary uv-beam-start", type: "submit", disabled: this.starting || running }, running ? "Searching…" : "Search"),
      ),
      this.startError && h("div", { class: "uv-error uv-opt-error uv-beam-error" }, this.startError),
    ];
  }

  renderLive() {
    const live = this.live;
    if (!live || live.sid !== this.sid) return null;
    if (live.state === "running") {
      const best = this.view()?.best_s;
      return h("div", { class: "uv-beam-status uv-beam-progress" }, h("span", { class: "uv-beam-spinner" }), `round ${live.round} · ${live.measured}/${live.inRound} candidates measured · best ${formatSeconds(best)}${whereLine(live.executor, [...live.candidates.values()])}`);
    }
    if (live.state === "done") {
      const d = /** @type {DoneEvent} */ (live.done); // set with the state
      return h("div", { class: "uv-beam-status uv-beam-outcome" }, "Done: ", kernelName(d.name, this.axisColors), ` in ${formatSeconds(d.time_s)} after ${d.rounds} rounds, ${d.candidates} candidates`);
    }
    return h("div", { class: "uv-beam-status uv-error" }, live.message);
  }

  renderSearch() {
    if (this.detailError) return h("p", { class: "uv-error" }, this.detailError);
    const s = this.view();
    if (!s) return this.sid == null ? null : h("p", { class: "uv-hint" }, "Loading the search…");
    const live = this.live?.sid === this.sid && this.live?.state === "running" ? this.live : null;
    const best = s.candidates.find((c) => c.id === s.best_id);
    const picked = s.candidates.find((c) => c.id === this.picked);
    return h(
      "div",
      { class: "uv-beam-search", dataset: { sid: s.id, status: s.status } },
      h(
        "div",
        { class: "uv-label" },
        `Search #${s.id} `,
        h("span", { class: `uv-beam-pill uv-pill-${s.status}` }, s.status),
        h("span", { class: "uv-dim" }, ` ${[s.kernel_name, s.device, s.width && `width ${s.width}`].filter(Boolean).join(" · ")}`),
      ),
      h("div", { class: "uv-beam-chart-box" }, beamChart(s, { rounds: live?.round ?? 0, picked: this.picked, describe: (opts) => describeOpts(this.meta, opts), onPick: (id) => ((this.picked = id), this.render()) })),
      h(
        "div",
        { class: "uv-beam-key" },
        h("span", {}, h("i", { class: "uv-beam-key-dot" }), "candidate"),
        h("span", {}, h("i", { class: "uv-beam-key-dot uv-on-path" }), "winning path"),
        h("span", {}, h("i", { class: "uv-beam-key-dot uv-best" }), "best"),
        h("span", {}, h("b", { class: "uv-error" }, "×"), " failed"),
        h("span", { class: "uv-dim" }, "click a candidate for its opts"),
      ),
      best ? this.renderWinner(s, best) : h("p", { class: "uv-hint" }, s.error ?? "No candidate has been timed yet."),
      picked && this.renderCandidate(picked, s),
    );
  }

  /**
   * @param {SearchShown} s
   * @param {Candidate} best
   */
  renderWinner(s, best) {
    /** @type {Map<number | null, Candidate>} */
    const byId = new Map(s.candidates.map((c) => [c.id, c]));
    const speedup = s.unoptimized_s && best.median_s ? s.unoptimized_s / best.median_s : null;
    return h(
      "div",
      { class: "uv-beam-winner" },
      h(
        "div",
        { class: "uv-label" },
        s.status === "done" ? "Winner " : "Best so far ",
        h("span", { class: "uv-dim" }, `${this.speed(s, best.median_s)}${speedup ? ` · ${speedup.toFixed(2)}× as fast as unoptimized (${formatSeconds(s.unoptimized_s)})` : ""}`),
      ),
      h(
        "ol",
        { class: "uv-beam-path-list" },
        s.winning_path.map((id) => {
          const c = /** @type {Candidate} */ (byId.get(id)); // the path runs through candidates
          const parent = byId.get(c.parent);
          const kind = candidateKind(c, parent);
          const fresh = parent ? c.opts.length - parent.opts.length : c.opts.length; // the opts this step added
          return this.candidateRow(s, c, kind, fresh, "uv-beam-step");
        }),
      ),
      this.renderHeuristic(s, byId),
      this.openButton(s, best.opts, s.status === "done" ? "Open the winner in the Kernel tab" : "Open the best so far in the Kernel tab"),
    );
  }

  // One candidate on a line: its kind, its full opts (those its step added outlined), its round and time.
  /**
   * @param {SearchShown} s
   * @param {Candidate} c
   * @param {string} kind
   * @param {number} fresh opts the step added (the last ones)
   * @param {string} cls
   */
  candidateRow(s, c, kind, fresh, cls) {
    return h(
      "li",
      { class: `${cls}${c.id === this.picked ? " uv-active" : ""}`, dataset: { id: c.id, kind }, onclick: () => ((this.picked = c.id), this.render()) },
      kindPill(kind),
      c.opts.length
        ? c.opts.map((o, i) => h("span", { class: `uv-chip uv-opt-chip${i >= c.opts.length - fresh ? " uv-new-opt" : ""}`, title: i >= c.opts.length - fresh ? "added by this step" : "" }, describeOpt(this.meta, o)))
        : h("span", { class: "uv-chip uv-opt-chip" }, "no opts"),
      h("span", { class: "uv-dim uv-beam-step-time" }, ` round ${c.round} · ${c.error ?? this.speed(s, c.median_s)}`),
    );
  }

  // The heuristic's candidate (and its re-timing) when the winning path does not go through it, so that what
  // BEAM is compared with is always named with its full opts and speed.
  /**
   * @param {SearchShown} s
   * @param {Map<number | null, Candidate>} byId (null: the unoptimized kernel's parent, none)
   */
  renderHeuristic(s, byId) {
    const heur = s.candidates.filter((c) => candidateKind(c, byId.get(c.parent)) === "heuristic" && !s.winning_path.includes(c.id));
    if (!heur.length) return null;
    const again = s.candidates.filter((c) => heur.some((x) => x.id === c.parent) && candidateKind(c, byId.get(c.parent)) === "re-timed");
    return h(
      "div",
      { class: "uv-beam-heuristic" },
      h("div", { class: "uv-label" }, "Compared with ", h("span", { class: "uv-dim" }, "the heuristic's kernel, not on the winning path")),
      h("ul", { class: "uv-beam-path-list" }, [...heur, ...again].map((c) => this.candidateRow(s, c, candidateKind(c, byId.get(c.parent)), 0, "uv-beam-other"))),
    );
  }

  /**
   * @param {Candidate} c
   * @param {SearchShown} s
   */
  renderCandidate(c, s) {
    const kind = candidateKind(c, s.candidates.find((p) => p.id === c.parent));
    const facts = [
      ["time", c.error ? null : c.median_s == null ? "same program as an earlier candidate" : `${this.speed(s, c.median_s)} (median of ${c.samples.length || "?"} runs)`],
      ["error", c.error],
      ["program", c.program_hash],
      ["uops", c.uop_count],
      ["compile", c.compile_s != null ? formatSeconds(c.compile_s) : null],
      ["built on", c.built_on],
      ["measured on", c.measured_on],
    ].filter(([, v]) => v != null);
    return h(
      "div",
      { class: "uv-beam-picked" },
      h("div", { class: "uv-label" }, `Candidate #${c.id} `, h("span", { class: "uv-dim" }, `${kind === "step" ? "" : `${kind} · `}round ${c.round}${c.parent != null ? `, from #${c.parent}` : ""}`)),
      h("div", { class: "uv-applied" }, c.opts.length ? c.opts.map((o) => h("span", { class: "uv-chip uv-opt-chip" }, describeOpt(this.meta, o))) : h("span", { class: "uv-dim" }, "no opts (the unoptimized kernel)")),
      h("dl", { class: "uv-beam-facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", { class: k === "error" ? "uv-error" : "" }, String(v))])),
      this.openButton(s, c.opts, "Open in the Kernel tab"),
    );
  }

  // Opts of the kernel shown can be opened in the Kernel tab (a search of another kernel's cannot).
  /**
   * @param {{kernel_hash: string | null}} s
   * @param {Opt[]} opts
   * @param {string} label
   */
  openButton(s, opts, label) {
    if (this.kernelHash() == null || s.kernel_hash !== this.kernelHash()) return null;
    return h("button", { class: "uv-button uv-beam-open", title: describeOpts(this.meta, opts), onclick: () => this.ctx.openOpts(opts, { tab: "kernel" }) }, label);
  }

  renderList() {
    const isKernel = this.kernelHash() != null;
    const toggle =
      isKernel &&
      h(
        "label",
        { class: "uv-beam-all uv-dim" },
        h("input", {
          type: "checkbox",
          checked: this.all,
          onchange: (/** @type {{target: HTMLInputElement}} */ e) => {
            this.all = e.target.checked;
            this.loadList();
            this.render();
          },
        }),
        " every kernel",
      );
    const mine = isKernel && !this.all;
    const title = h("div", { class: "uv-label uv-beam-list-title" }, mine ? "Searches of this kernel" : "Searches in the database", toggle);
    if (this.listError) return [title, h("p", { class: "uv-error uv-beam-list-error" }, this.listError)];
    if (!this.list) return [title, h("p", { class: "uv-hint" }, "Loading…")];
    return [
      this.results.map((r) =>
        h(
          "p",
          { class: "uv-beam-result uv-hint" },
          `Tuned on ${r.target.device_name || r.target.device}: ${formatSeconds(r.median_s)} with `,
          h("span", { class: "uv-chip uv-opt-chip" }, describeOpts(this.meta, r.opts)),
          r.search_id != null && [" (", h("a", { href: "#", onclick: (/** @type {MouseEvent} */ e) => (e.preventDefault(), this.go({ search: r.search_id }, true)) }, `search #${r.search_id}`), ")"],
        ),
      ),
      title,
      this.list.length
        ? h(
            "table",
            { class: "uv-beam-list" },
            h("thead", {}, h("tr", {}, ["#", !mine && "kernel", "device", "width", "best", "cands", "started", "status"].map((t) => t && h("th", {}, t)))),
            h(
              "tbody",
              {},
              this.list.map((s) =>
                h(
                  "tr",
                  { class: `uv-beam-row${s.id === this.sid ? " uv-active" : ""}`, dataset: { sid: s.id }, onclick: () => this.go({ search: s.id }, true) },
                  h("td", {}, s.id),
                  !mine && h("td", {}, kernelName(s.kernel_name, this.axisColors)),
                  h("td", { title: s.device_name }, s.device),
                  h("td", {}, s.width ?? "–"),
                  h("td", { class: "uv-beam-best" }, this.speed(s, s.best_s)),
                  h("td", {}, s.n_candidates),
                  h("td", { title: new Date(s.started_at * 1000).toLocaleString() }, ago(s.started_at)),
                  h("td", {}, h("span", { class: `uv-beam-pill uv-pill-${s.status}`, title: s.error ?? "" }, s.status)),
                ),
              ),
            ),
          )
        : h("p", { class: "uv-hint uv-beam-none" }, mine ? "No search of this kernel yet." : "The tuning database has no searches yet."),
      this.next != null && h("button", { class: "uv-button uv-beam-more", onclick: () => this.loadMore() }, "Older searches"),
      this.moreError && h("p", { class: "uv-error uv-beam-list-error" }, this.moreError),
    ];
  }
}
