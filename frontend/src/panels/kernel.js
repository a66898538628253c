// The Kernel tab: the kernel's name in axis colours, where in the user's code it was made, its axes (click one to
// pick it), a form to apply an opt to that axis (the choices the data source's meta offers for the kernel's
// device), the opts applied so far, "time it" (a run on the device: time, GFLOP/s, GB/s), and the source, its diff
// against the kernel without the last opt, the Linear listing, or the machine code. With opts in the view state it
// shows the kernel lowered again with exactly those opts (the data source records that lowering as a new trace,
// whose passes the graph then shows, at the step of the last opt).
import { fill, h, textOn } from "../dom.js";
import { highlight, highlightDiff, highlightListing } from "../highlight.js";
import { kernelName } from "../names.js";
import { choicesFor, describeOpt, formatOpts, makeOpt } from "../opts.js";
import { unifiedDiff } from "../text-diff.js";
import { formatSeconds } from "./beam-chart.js";
/** @import { ContextInfo, Frame, KernelView, MachineCode, Opt, TimingView, Work } from "../../types/api" */
/** @import { PanelContext, PanelDef, PanelView, Variant } from "../../types/ui" */
/** @typedef {(KernelView | Variant) & {shown: {tid: string, ci: number}}} Shown a kernel view, and the trace and context of its lowering */
/** @typedef {{loading?: boolean, machine?: MachineCode, diff?: string, note?: string, error?: string}} Extra */

/** @type {PanelDef} */
export const kernelPanel = {
  id: "kernel",
  title: "Kernel",
  create: (el, ctx) => new KernelPanel(el, ctx),
};

const LISTINGS = [
  ["source", "Source"],
  ["diff", "Diff"],
  ["linear", "Linear"],
  ["machine", "Machine code"],
];

// "0.067 s · 32.0 GFLOP/s · 0.19 GB/s"
/**
 * @param {number} time seconds
 * @param {Work | null | undefined} work
 */
export function speedText(time, work) {
  /** @type {(amount: number | null | undefined, unit: string) => string} */
  const rate = (amount, unit) => (amount != null && time > 0 ? ` · ${(amount / time / 1e9).toFixed(amount / time / 1e9 < 10 ? 2 : 1)} ${unit}` : "");
  return `${formatSeconds(time)}${rate(work?.flops, "GFLOP/s")}${rate(work?.bytes, "GB/s")}`;
}

// How a variant's time compares with the kernel as compiled: "1.72× faster", "1.10× slower", "the same".
/**
 * @param {number} before seconds
 * @param {number} after seconds
 */
export function ratioText(before, after) {
  if (!(before > 0 && after > 0)) return "—";
  const r = before / after;
  if (Math.abs(r - 1) < 0.005) return "the same";
  return r > 1 ? `${r.toFixed(2)}× faster` : `${(1 / r).toFixed(2)}× slower`;
}

class KernelPanel {
  /**
   * @param {HTMLElement} el
   * @param {PanelContext} ctx
   */
  constructor(el, ctx) {
    this.el = el;
    this.ctx = ctx;
    this.axisColors = ctx.axisColors;
    this.opColors = new Map(ctx.meta.op_groups.flatMap((g) => g.ops.map((op) => [op, g.color])));
    this.form = { axis: 0, choice: 0, amount: 4, top: false, other: 1 };
    this.listing = "source";
    /** @type {string | null} */
    this.error = null;
    this.busy = false;
    /** @type {string | null} */
    this.key = null; // trace/context/opts of the kernel shown
    /** @type {Map<string, Extra>} */
    this.extra = new Map(); // per kernel shown and listing: the diff or machine code, or the error getting it
    /** @type {Map<string, {timing?: TimingView, error?: string, running?: boolean}>} */
    this.timings = new Map(); // per kernel shown: {timing} | {error} | {running}
    /** @type {string | null} */
    this.compiled = null; // trace/context of the kernel as compiled (the kernel the variants are of)
    /** @type {Shown | null} */
    this.view = null;
    this.custom = false;
    /** @type {ContextInfo | null} */
    this.context = null;
  }

  destroy() {}

  /** @param {PanelView} view */
  async update({ trace, context, state }) {
    const { ci, opts } = state;
    const tid = trace.id;
    this.context = context;
    const key = `${tid}/${ci}/${opts ? formatOpts(opts) : ""}`;
    if (key === this.key) return;
    const sameKernel = this.key?.startsWith(`${tid}/${ci}/`);
    this.key = key;
    if (context.kind !== "kernel") return this.showMessage(`${context.label} is a ${context.kind} context: pick a kernel to see its source and opts.`);
    if (!sameKernel) this.showMessage("Loading the kernel…");
    /** @type {Shown | undefined} */
    let view;
    let error = null;
    try {
      view = { ...(await this.ctx.fetch(`kernel/${tid}/${ci}`, () => this.ctx.source.kernel(tid, ci))), shown: { tid, ci } };
      this.compiled = `${tid}/${ci}`; // the kernel as compiled: a variant's time is shown beside its
      if (opts) {
        const variant = await this.ctx.variant(tid, ci, opts);
        view = { ...variant, shown: { tid: /** @type {string} */ (variant.trace_id), ci: 0 } }; // the server keeps each lowering
      }
    } catch (err) {
      if (!view) return this.key === key && this.showMessage(err.message, true);
      error = `The opts in this view do not apply: ${err.message}`;
    }
    if (this.key === key) this.show(/** @type {Shown} */ (view), opts !== null && !error, error); // (the kernel loaded)
  }

  // Apply and Undo (a list of opts) and Reset (null: the kernel as compiled): the graph goes to the step of the
  // last opt; an illegal list rejects with the reason.
  /** @param {Opt[] | null} opts */
  apply(opts) {
    return this.ctx.openOpts(opts);
  }

  // A context that is not a kernel (the schedule), or a kernel that could not be loaded.
  /**
   * @param {string} text
   * @param {boolean} [isError]
   */
  showMessage(text, isError) {
    this.view = null;
    fill(this.el, h("p", { class: isError ? "uv-error" : "uv-hint" }, text));
  }

  // view: the kernel as compiled, or lowered again with chosen opts (custom), as the data source returned it;
  // view.opts are the opts behind it and view.axes its axes, which the next opt refers to; view.shown the trace and
  // context of its lowering (for timing and machine code).
  /**
   * @param {Shown} view
   * @param {boolean} custom
   * @param {string | null} [error]
   */
  show(view, custom, error = null) {
    this.view = view;
    this.custom = custom;
    this.error = error;
    if (this.form.axis >= view.axes.length) this.form.axis = 0;
    this.render();
    this.loadListing();
  }

  // (the methods below run while a kernel is shown: this.view is set)
  shownKey() {
    return `${/** @type {Shown} */ (this.view).shown.tid}/${/** @type {Shown} */ (this.view).shown.ci}`;
  }

  render() {
    const { view, form } = /** @type {this & {view: Shown}} */ (this);
    const { meta, readOnly } = this.ctx;
    const opts = view.opts;
    const choices = choicesFor(meta, view.device);
    if (form.choice >= choices.length) form.choice = 0;
    const choice = choices[form.choice];
    // On success the app shows the new kernel (show()); on failure the reason shows under the form.
    /** @param {Opt[] | null} next */
    const submit = async (next) => {
      this.error = null;
      this.busy = true;
      this.render();
      try {
        await this.apply(next);
      } catch (err) {
        this.error = err.message;
      }
      this.busy = false;
      if (this.view) this.render();
    };
    /** @param {number} selected */
    const axisOptions = (selected) => view.axes.map((a, i) => h("option", { value: i, selected: i === selected }, `a${i} ${a.letter}${a.size}`));
    fill(
      this.el,
      h("div", { class: "uv-section-title uv-kernel-title" }, kernelName(view.name, this.axisColors), h("span", { class: "uv-dim" }, view.device ?? "")),
      this.provenance(),
      h("div", { class: "uv-label" }, "Axes ", h("span", { class: "uv-dim" }, "click one to optimize it")),
      h(
        "div",
        { class: "uv-axes" },
        view.axes.map((a, i) =>
          h(
            "button",
            {
              class: `uv-axis${i === form.axis ? " uv-active" : ""}`,
              style: `background:${a.color};color:${textOn(a.color)}`,
              title: `axis ${i}: ${a.type}, size ${a.size}`,
              dataset: { axis: i, type: a.type, size: a.size },
              onclick: () => {
                form.axis = i;
                this.render();
              },
            },
            h("span", { class: "uv-axis-index" }, `a${i}`),
            `${a.letter}${a.size}`,
          ),
        ),
      ),
      !readOnly &&
        h(
          "form",
          {
            class: "uv-opt-form",
            onsubmit: (/** @type {SubmitEvent} */ event) => {
              event.preventDefault();
              submit([...opts, makeOpt(choice, form)]);
            },
          },
          h(
            "select",
            { class: "uv-opt-op", "aria-label": "opt", title: `the opts ${view.device ?? "this device"} can take`, onchange: (/** @type {{target: HTMLSelectElement}} */ e) => ((form.choice = Number(e.target.value)), this.render()) },
            choices.map((c, i) => h("option", { value: i, selected: i === form.choice, title: c.doc }, c.label)),
          ),
          choice.axis && h("span", { class: "uv-dim" }, `a${form.axis}`),
          choice.amount &&
            h("input", {
              class: "uv-opt-amount",
              type: "number",
              min: 1,
              value: form.amount,
              "aria-label": choice.amount,
              title: choice.doc,
              oninput: (/** @type {{target: HTMLInputElement}} */ e) => (form.amount = Number(e.target.value)),
            }),
          choice.top &&
            h("label", { class: "uv-opt-top", title: "split as (k, n/k) instead of (n/k, k)" }, h("input", { type: "checkbox", checked: form.top, onchange: (/** @type {{target: HTMLInputElement}} */ e) => (form.top = e.target.checked) }), "top"),
          choice.other_axis && ["with ", h("select", { class: "uv-opt-other", onchange: (/** @type {{target: HTMLSelectElement}} */ e) => (form.other = Number(e.target.value)) }, axisOptions(form.other))],
          h("button", { class: "uv-button uv-primary uv-opt-apply", type: "submit", disabled: this.busy }, "Apply"),
        ),
      this.error && h("div", { class: "uv-error uv-opt-error" }, this.error),
      h(
        "div",
        { class: "uv-applied" },
        h("span", { class: "uv-label" }, this.custom ? "Opts" : "Opts as compiled"),
        opts.length ? opts.map((o) => h("span", { class: "uv-chip uv-opt-chip" }, describeOpt(meta, o))) : h("span", { class: "uv-dim" }, "none"),
        !readOnly && opts.length > 0 && h("button", { class: "uv-button uv-opt-undo", title: "lower the kernel without the last opt", onclick: () => submit(opts.slice(0, -1)) }, "Undo"),
        !readOnly && this.custom && h("button", { class: "uv-button uv-opt-reset", title: "back to the kernel as compiled", onclick: () => submit(null) }, "Reset"),
      ),
      !readOnly && this.timeRow(),
      h(
        "div",
        { class: "uv-subtabs" },
        LISTINGS.filter(([kind]) => !(readOnly && (kind === "machine" || kind === "diff"))).map(([kind, label]) => // both lower or compile
          h("button", { class: `uv-subtab uv-subtab-${kind}${this.listing === kind ? " uv-active" : ""}`, onclick: () => ((this.listing = kind), this.render(), this.loadListing()) }, label),
        ),
      ),
      this.code(),
    );
  }

  // Where the kernel was made: the innermost frames of the user's code, newest first.
  provenance() {
    const stack = this.context?.stack ?? [];
    if (!stack.length) return null;
    const [inner, ...outer] = [...stack].reverse();
    /** @param {Frame} f */
    const frame = (f) => h("div", { class: "uv-frame", title: f.file }, h("code", { class: "uv-location" }, `${f.file}:${f.line}`), h("span", { class: "uv-dim" }, ` in ${f.function}`), f.code && h("pre", { class: "uv-frame-code" }, f.code));
    return h(
      "div",
      { class: "uv-provenance" },
      h("div", { class: "uv-label" }, "Made by ", h("span", { class: "uv-dim" }, "the code that realized it")),
      frame(inner),
      outer.length > 0 && h("details", {}, h("summary", { class: "uv-dim" }, `${outer.length} calling frames`), outer.map(frame)),
    );
  }

  // "time it": the kernel shown; for a variant (other opts) the kernel as compiled too, where it has not been timed,
  // so that the two times stand side by side with their ratio.
  timeRow() {
    const shown = this.shownKey();
    const compiled = this.compiled ?? shown;
    const got = this.timings.get(shown);
    const before = compiled !== shown ? this.timings.get(compiled) : undefined;
    /** @param {string} key trace/context */
    const time = async (key) => {
      const [tid, ci] = [key.slice(0, key.lastIndexOf("/")), Number(key.slice(key.lastIndexOf("/") + 1))];
      this.timings.set(key, { running: true });
      this.render();
      try {
        this.timings.set(key, { timing: await this.ctx.source.timeKernel(tid, ci) });
      } catch (err) {
        this.timings.set(key, { error: err.message });
      }
      if (this.view) this.render();
    };
    const run = async () => {
      await time(shown);
      if (compiled !== shown && !this.timings.get(compiled)?.timing) await time(compiled);
    };
    const work = /** @type {Shown} */ (this.view).work;
    const after = got?.timing;
    const then = before?.timing;
    return h(
      "div",
      { class: "uv-time-row" },
      h("button", { class: "uv-button uv-time-it", disabled: Boolean(got?.running || before?.running), title: `run this kernel on ${/** @type {Shown} */ (this.view).device ?? "its device"} as BEAM times a candidate: checked, then timed${compiled !== shown ? "; the kernel as compiled too, beside it" : ""}`, onclick: run }, got?.running || before?.running ? "timing…" : "time it"),
      then && h("span", { class: "uv-timing uv-timing-before", title: `the kernel as compiled: median of ${then.samples.length} runs` }, `as compiled ${speedText(then.time_s, work)}`),
      then && after && h("span", { class: "uv-dim" }, " → "),
      after && h("span", { class: "uv-timing", title: `median of ${after.samples.length} runs` }, `${then ? "with these opts " : ""}${speedText(after.time_s, work)}`),
      then && after && h("span", { class: "uv-speedup" }, ` (${ratioText(then.time_s, after.time_s)})`),
      got?.error && h("span", { class: "uv-error uv-timing-error" }, got.error),
      before?.error && h("span", { class: "uv-error uv-timing-error" }, `as compiled: ${before.error}`),
    );
  }

  // Loads what the listing shown needs beyond the kernel view: the source without the last opt, the machine code.
  async loadListing() {
    const view = this.view;
    if (!view || !["diff", "machine"].includes(this.listing)) return;
    const key = `${this.listing}/${this.shownKey()}`;
    if (this.extra.has(key)) return;
    this.extra.set(key, { loading: true });
    try {
      if (this.listing === "machine") this.extra.set(key, { machine: await this.ctx.fetch(`machine/${this.shownKey()}`, () => this.ctx.source.machineCode(view.shown.tid, view.shown.ci)) });
      else if (view.opts.length) {
        const prev = await this.ctx.variant(/** @type {string} */ (this.ctx.state().tid), /** @type {number} */ (this.ctx.state().ci), view.opts.slice(0, -1));
        this.extra.set(key, { diff: unifiedDiff(prev.source, view.source, ["without the last opt", `with ${describeOpt(this.ctx.meta, view.opts[view.opts.length - 1])}`]) });
      } else this.extra.set(key, { note: "No opts: there is no earlier kernel to compare with." });
    } catch (err) {
      this.extra.set(key, { error: err.message });
    }
    if (this.view === view) this.render();
  }

  code() {
    const { view } = /** @type {this & {view: Shown}} */ (this);
    const pre = h("pre", { class: `uv-code uv-kernel-${this.listing}` });
    const extra = this.extra.get(`${this.listing}/${this.shownKey()}`);
    if (this.listing === "source") {
      if (view.source) pre.innerHTML = highlight(view.source, "c");
      else pre.textContent = "This device runs the Linear program directly: there is no source.";
    } else if (this.listing === "linear") {
      if (view.linear) pre.innerHTML = highlightListing(view.linear, (op) => this.opColors.get(op));
      else pre.textContent = "No Linear listing was returned for these opts.";
    } else if (!extra || extra.loading) pre.textContent = "Loading…";
    else if (extra.error) return h("p", { class: "uv-error" }, extra.error);
    else if (extra.note) return h("p", { class: "uv-hint" }, extra.note);
    else if (this.listing === "diff") {
      if (extra.diff) pre.innerHTML = highlightDiff(extra.diff);
      else pre.textContent = "The last opt leaves the source as it was.";
    } else {
      const m = /** @type {MachineCode} */ (extra.machine);
      return [h("p", { class: "uv-hint uv-machine-note" }, m.note), m.text && h("pre", { class: "uv-code uv-kernel-machine" }, m.text)];
    }
    return pre;
  }
}
