// The sidebar: traces; the open trace's contexts (kernels named in coloured axis letters, told apart by a suffix
// where names repeat), with the kernel's variants lowered again with opts nested under it; the passes of the
// context shown, grouped by stage and indented by nesting depth, each with its number of matches and its time.
import { fill, h } from "./dom.js";
import { kernelName } from "./names.js";
import { formatOpts } from "./opts.js";
/** @import { ContextInfo, Opt, OptsOrigin, TraceDetail, TraceSummary } from "../types/api" */
/** @import { ViewState } from "../types/ui" */
/** @typedef {TraceSummary & {origin: OptsOrigin}} OptsTrace a kernel lowered again with opts */

/** @param {number} ns */
export function formatNs(ns) {
  if (ns < 1e6) return `${(ns / 1e3).toFixed(ns < 1e4 ? 1 : 0)} µs`;
  if (ns < 1e9) return `${(ns / 1e6).toFixed(ns < 1e7 ? 1 : 0)} ms`;
  return `${(ns / 1e9).toFixed(2)} s`;
}

// The innermost frame of the code that made a context: "model.py:12".
/** @param {Pick<ContextInfo, "stack">} c */
export const madeAt = (c) => (c.stack?.length ? `${c.stack[c.stack.length - 1].file.split("/").pop()}:${c.stack[c.stack.length - 1].line}` : null);

export class Sidebar {
  /**
   * @param {HTMLElement} el
   * @param {Map<string, string>} axisColors
   * @param {(patch: Partial<ViewState>, push?: boolean) => void} go
   * @param {(opts: Opt[]) => string} describe the text of a list of opts
   */
  constructor(el, axisColors, go, describe) {
    this.el = el;
    this.axisColors = axisColors;
    this.go = go;
    this.describe = describe;
    /** @type {OptsTrace[]} */
    this.variants = [];
  }

  // traces: every trace (opts traces are listed under their kernel); trace: the open one; shown: the context whose
  // passes are drawn (the open context, or its variant with the view's opts).
  /**
   * @param {TraceSummary[]} traces
   * @param {TraceDetail} trace
   * @param {ContextInfo} shown
   * @param {ViewState} state
   */
  render(traces, trace, shown, state) {
    this.variants = /** @type {OptsTrace[]} */ (traces.filter((t) => t.origin));
    fill(
      this.el,
      h("div", { class: "uv-side-head" }, "Traces"),
      traces
        .filter((t) => !t.origin)
        .map((t) => {
          const open = t.id === state.tid;
          return [
            h(
              "button",
              { class: `uv-trace${open ? " uv-active" : ""}`, dataset: { tid: t.id }, title: `${t.id} (${t.source})`, onclick: () => this.go({ tid: t.id, ci: null, pi: 0, k: 0, opts: null, search: null }, true) },
              h("span", { class: "uv-trace-name" }, t.name),
              h("span", { class: "uv-count" }, `${t.contexts}`),
            ),
            open && trace && this.contexts(trace, shown, state),
          ];
        }),
    );
    this.reveal(this.el.querySelector(".uv-pass.uv-active"));
  }

  // Scrolls the sidebar (and nothing around it, such as a notebook) so that `row` is in sight.
  /** @param {HTMLElement | null} row */
  reveal(row) {
    if (!row) return;
    const { scrollTop, clientHeight } = this.el;
    const [top, bottom] = [row.offsetTop, row.offsetTop + row.offsetHeight];
    if (top < scrollTop) this.el.scrollTop = top - 40;
    else if (bottom > scrollTop + clientHeight) this.el.scrollTop = bottom - clientHeight + 40;
  }

  /**
   * @param {TraceDetail} trace
   * @param {ContextInfo} shown
   * @param {ViewState} state
   */
  contexts(trace, shown, state) {
    return h(
      "div",
      { class: "uv-ctxs" },
      trace.contexts.map((c) => {
        const open = c.index === state.ci;
        const where = madeAt(c);
        const variants = this.variants.filter((v) => v.origin.trace_id === trace.id && v.origin.context === c.index);
        return [
          h(
            "button",
            {
              class: `uv-ctx${open && !state.opts ? " uv-active" : ""}${open ? " uv-open" : ""}`,
              dataset: { ci: c.index, name: c.name, kind: c.kind },
              title: `${c.label}${where ? `\nmade at ${where}: ${c.stack[c.stack.length - 1].code}` : ""}\n${formatNs(c.time_ns)} to lower`,
              onclick: () => this.go({ ci: c.index, pi: 0, k: 0, opts: null, search: null }, true),
            },
            h("span", { class: "uv-ctx-name" }, c.kind === "kernel" ? kernelName(c.name, this.axisColors, c.label) : h("span", { class: "uv-kname" }, c.label), where && h("span", { class: "uv-made-at" }, where)),
            h("span", { class: "uv-kind" }, c.kind),
          ),
          open && variants.length > 0 && this.variantRows(variants, state),
          open && this.passes(shown, state),
        ];
      }),
    );
  }

  // The kernel's lowerings with other opts (made in the Kernel tab): a click shows that one.
  /**
   * @param {OptsTrace[]} variants
   * @param {ViewState} state
   */
  variantRows(variants, state) {
    const current = state.opts ? formatOpts(state.opts) : null;
    return h(
      "div",
      { class: "uv-variants" },
      variants.map((v) =>
        h(
          "button",
          {
            class: `uv-variant${formatOpts(v.origin.opts) === current ? " uv-active" : ""}`,
            dataset: { tid: v.id },
            title: `lowered again with ${this.describe(v.origin.opts)}`,
            onclick: () => this.go({ opts: v.origin.opts, pi: 0, k: 0 }, true),
          },
          h("span", { class: "uv-variant-mark" }, "↳"),
          kernelName(v.name, this.axisColors),
          h("span", { class: "uv-variant-opts" }, this.describe(v.origin.opts)),
        ),
      ),
    );
  }

  /**
   * @param {ContextInfo} ctx
   * @param {ViewState} state
   */
  passes(ctx, state) {
    /** @type {HTMLElement[]} */
    const rows = [];
    /** @type {string | null | undefined} */
    let stage;
    for (const p of ctx.passes) {
      if (p.depth === 0 && p.stage !== stage) {
        stage = p.stage;
        rows.push(h("div", { class: "uv-stage" }, stage ?? "no stage"));
      }
      rows.push(
        h(
          "button",
          {
            class: `uv-pass${p.index === state.pi ? " uv-active" : ""}${p.error ? " uv-failed" : ""}`,
            dataset: { pi: p.index },
            style: `padding-left:${22 + 12 * p.depth}px`,
            title: p.error ?? `${p.opt ? p.opt.text : p.name}: ${p.steps} matches, ${formatNs(p.time_ns)}`,
            onclick: () => this.go({ pi: p.index, k: 0 }, true),
          },
          h("span", { class: "uv-pass-name" }, p.opt ? p.opt.text : p.name),
          p.error && h("span", { class: "uv-error-mark" }, "!"),
          h("span", { class: "uv-pass-time" }, formatNs(p.time_ns)),
          h("span", { class: `uv-count${p.steps ? "" : " uv-zero"}` }, `${p.steps}`),
        ),
      );
    }
    return h("div", { class: "uv-passes" }, rows);
  }
}
