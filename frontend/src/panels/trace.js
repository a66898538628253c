// The Trace tab: where the trace's kernels were made (each context by the line of the user's code that realized
// it, a click opens it) and, for a served script, what it printed on stdout and stderr.
import { fill, h } from "../dom.js";
import { kernelName } from "../names.js";
import { formatNs } from "../sidebar.js";
/** @import { ContextInfo, Frame, TraceDetail } from "../../types/api" */
/** @import { PanelContext, PanelDef, ViewState } from "../../types/ui" */

/** @type {PanelDef} */
export const tracePanel = {
  id: "trace",
  title: "Trace",
  create: (el, ctx) => ({
    update: ({ trace, state }) => renderTrace(el, trace, state, ctx),
    destroy: () => {},
  }),
};

/**
 * @param {HTMLElement} el
 * @param {TraceDetail} trace
 * @param {ViewState} state
 * @param {PanelContext} ctx
 */
function renderTrace(el, trace, state, ctx) {
  /** @param {ContextInfo} c */
  const where = (c) => c.stack[c.stack.length - 1];
  /** @type {Map<string, {frame: Frame | null, contexts: ContextInfo[]}>} */
  const lines = new Map(); // "file:line" -> {frame, contexts}
  for (const c of trace.contexts) {
    const f = c.stack.length ? where(c) : null;
    const key = f ? `${f.file}:${f.line}` : "";
    if (!lines.has(key)) lines.set(key, { frame: f, contexts: [] });
    /** @type {{contexts: ContextInfo[]}} */ (lines.get(key)).contexts.push(c);
  }
  const out = trace.output;
  fill(
    el,
    h("div", { class: "uv-section-title" }, trace.name, h("span", { class: "uv-dim" }, `${trace.source}${trace.device ? ` · ${trace.device}` : ""}`)),
    h("div", { class: "uv-label" }, "Made by ", h("span", { class: "uv-dim" }, "each line of code and the contexts it made")),
    [...lines.values()].map(({ frame, contexts }) =>
      h(
        "div",
        { class: "uv-made" },
        frame
          ? h("div", { class: "uv-frame" }, h("code", { class: "uv-location uv-made-at" }, `${frame.file}:${frame.line}`), h("span", { class: "uv-dim" }, ` in ${frame.function}`), frame.code && h("pre", { class: "uv-frame-code" }, frame.code))
          : h("div", { class: "uv-dim" }, "no code recorded (a trace from before uopviz kept it)"),
        h(
          "div",
          { class: "uv-made-contexts" },
          contexts.map((c) =>
            h(
              "button",
              { class: `uv-chip uv-made-context${c.index === state.ci ? " uv-active" : ""}`, dataset: { ci: c.index }, title: `${formatNs(c.time_ns)} to lower`, onclick: () => ctx.go({ ci: c.index, pi: 0, k: 0, opts: null, tab: "kernel" }, true) },
              c.kind === "kernel" ? kernelName(c.name, ctx.axisColors, c.label) : c.label,
            ),
          ),
        ),
      ),
    ),
    out && [
      h("div", { class: "uv-label" }, "stdout ", out.truncated && h("span", { class: "uv-dim" }, "(the first 64 KB)")),
      h("pre", { class: "uv-code uv-stdout" }, out.stdout || "(nothing)"),
      h("div", { class: "uv-label" }, "stderr"),
      h("pre", { class: "uv-code uv-stderr" }, out.stderr || "(nothing)"),
    ],
  );
}
