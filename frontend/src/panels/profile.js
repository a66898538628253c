// The Profile tab: a profiled block's kernel launches (a `uopviz.profile()` recorded inside the trace, such as one
// training step) as a timeline in launch order and a table, most time first, with each launch's time, share,
// GFLOP/s, GB/s and place under its device's roofline. A click on either opens the kernel context that lowered it.
import { fill, h } from "../dom.js";
import { originText, originTitle, shortFile } from "../graph/origin.js";
import { kernelName } from "../names.js";
import { formatSeconds } from "./beam-chart.js";
/** @import { Frame, LaunchRow, NodeOrigin, ProfileView, TraceDetail } from "../../types/api" */
/** @import { PanelContext, PanelDef, ViewState } from "../../types/ui" */

/** @type {PanelDef} */
export const profilePanel = {
  id: "profile",
  title: "Profile",
  create: (el, ctx) => {
    let chosen = 0; // which of the trace's profiles is shown
    /** @type {{trace: TraceDetail, state: ViewState} | null} */
    let last = null;
    const draw = () => last && renderProfile(el, last.trace, last.state, ctx, chosen, (i) => ((chosen = i), draw()));
    return {
      update: ({ trace, state }) => {
        if (last?.trace !== trace) chosen = 0;
        last = { trace, state };
        draw();
      },
      destroy: () => {},
    };
  },
};

// Each launch's place on the timeline: where it starts and how wide it is, as fractions of the launches' time.
/**
 * @param {LaunchRow[]} launches
 * @returns {{start: number, width: number}[]}
 */
export function timelineSpans(launches) {
  const total = launches.reduce((t, l) => t + l.time_s, 0);
  let at = 0;
  return launches.map((l) => {
    const span = { start: total ? at / total : 0, width: total ? l.time_s / total : 0 };
    at += l.time_s;
    return span;
  });
}

/** @type {Record<string, string>} a launch column's class (its width), where its name is no class name */
const COLUMN_CLASS = { "made by": "maker", "GFLOP/s": "gflops", "GB/s": "gbs" };

// The launch table's columns: "made by" only where some launch's kernel knows the Tensor op that made it (a @jit
// step captured before its profile began knows none: an empty column would only narrow the others).
/**
 * @param {LaunchRow[]} launches
 * @returns {string[]}
 */
export function launchColumns(launches) {
  return ["kernel", ...(launches.some((l) => l.origin) ? ["made by"] : []), "time", "share", "GFLOP/s", "GB/s", "roof"];
}

// The launches' indices, most time first (launch order among equals).
/** @param {LaunchRow[]} launches */
export function byTime(launches) {
  return launches.map((_, i) => i).sort((a, b) => launches[b].time_s - launches[a].time_s || a - b);
}

/**
 * @typedef {object} LineGroup the launches of one Tensor line: the user's line whose Tensor op made their kernels'
 *   values (a gradient's kernels apart, under the forward op's line), else the line that ran them
 * @property {string} key
 * @property {Frame | null} line
 * @property {string | null} op the Tensor op, where the profile knows it
 * @property {boolean} backward whether these are the kernels of its gradient
 * @property {number[]} launches indices into the profile's launches
 * @property {number} time_s
 * @property {number} share
 */

// The launches grouped by Tensor line (as Profile.by_line groups them), most time first.
/**
 * @param {LaunchRow[]} launches
 * @returns {LineGroup[]}
 */
export function byLine(launches) {
  /** @type {Map<string, LineGroup>} */
  const groups = new Map();
  launches.forEach((l, i) => {
    /** @type {NodeOrigin | null} */
    const forward = l.origin ? (l.origin.grad_of ?? l.origin) : null;
    const line = forward ? { file: forward.file, line: forward.line, function: forward.function, code: forward.code ?? "" } : l.line;
    const backward = !!l.origin?.grad_of;
    const key = line ? `${line.file}:${line.line}:${backward}` : "";
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { key, line, op: forward?.op ?? null, backward, launches: [], time_s: 0, share: 0 }));
    g.launches.push(i);
    g.time_s += l.time_s;
    g.share += l.share;
  });
  return [...groups.values()].sort((a, b) => b.time_s - a.time_s);
}

/** @param {LineGroup} g */
const lineText = (g) =>
  g.line ? `${shortFile(g.line.file)}:${g.line.line}${g.op ? ` ${g.op.replace(/^Tensor\./, "")}` : ""}${g.backward ? " (backward)" : ""}` : "no line of user code";

/** @param {number} rate GFLOP/s or GB/s */
const formatRate = (rate) => (rate < 10 ? rate.toFixed(2) : rate.toFixed(1));

/**
 * @param {HTMLElement} el
 * @param {TraceDetail} trace
 * @param {ViewState} state
 * @param {PanelContext} ctx
 * @param {number} chosen
 * @param {(i: number) => void} choose
 */
function renderProfile(el, trace, state, ctx, chosen, choose) {
  if (!trace.profiles.length) {
    fill(
      el,
      h("div", { class: "uv-section-title" }, "Profile"),
      h("p", { class: "uv-hint" }, "This trace holds no profile. Run the step inside ", h("code", {}, "with uopviz.profile():"), " while the trace records, and its kernel launches show here."),
    );
    return;
  }
  const p = /** @type {ProfileView} */ (trace.profiles[Math.min(chosen, trace.profiles.length - 1)]);
  const spans = timelineSpans(p.launches);
  const columns = launchColumns(p.launches);
  const makers = columns.includes("made by");
  /** @type {(l: LaunchRow, i: number) => string} */
  const tip = (l, i) =>
    `#${i + 1} ${l.kernel}: ${formatSeconds(l.time_s)} (${(l.share * 100).toFixed(1)}%), ${formatRate(l.gflops)} GFLOP/s, ${formatRate(l.gbs)} GB/s, ${(l.roof * 100).toFixed(0)}% of its roofline, ${l.bound}-bound` +
    (l.line ? ` · ${l.line.file}:${l.line.line}` : "") +
    (l.context == null ? " · its graph was not recorded" : "");
  /** @type {(l: LaunchRow) => (() => void) | null} */
  const open = (l) => (l.context == null ? null : () => ctx.go({ ci: l.context, pi: 0, k: 0, opts: null }, true));
  /** @type {(ci: number) => (e: MouseEvent) => void} */
  const tune = (ci) => (e) => {
    e.stopPropagation(); // the row's own click opens the kernel in this tab
    ctx.go({ ci, pi: 0, k: 0, opts: null, tab: "beam" }, true);
  };
  /** @type {(l: LaunchRow) => string} */
  const marks = (l) => `uv-${l.bound}${l.context != null && l.context === state.ci ? " uv-active" : ""}`;
  const roofs = Object.entries(p.roofs).map(([d, r]) => `${d}: ${formatRate(r.gflops)} GFLOP/s, ${formatRate(r.gbs)} GB/s`);
  fill(
    el,
    h("div", { class: "uv-section-title" }, "Profile", h("span", { class: "uv-dim" }, `${p.launches.length} launches`)),
    trace.profiles.length > 1 &&
      h(
        "div",
        { class: "uv-profile-choice" },
        trace.profiles.map((_, i) => h("button", { class: `uv-chip${i === chosen ? " uv-active" : ""}`, onclick: () => choose(i) }, `profile ${i + 1}`)),
      ),
    h("div", { class: "uv-facts" }, `kernels ${formatSeconds(p.kernel_s)} of ${formatSeconds(p.wall_s)} wall`, h("span", { class: "uv-dim" }, ` · roofs ${roofs.join("; ")}`)),
    h("div", { class: "uv-label" }, "Timeline ", h("span", { class: "uv-dim" }, "launches in order, as wide as their time")),
    h(
      "div",
      { class: "uv-timeline" },
      p.launches.map((l, i) =>
        h("div", {
          class: `uv-launch ${marks(l)}`,
          style: `left:${(spans[i].start * 100).toFixed(3)}%;width:${(spans[i].width * 100).toFixed(3)}%;opacity:${(0.35 + 0.65 * Math.min(1, l.roof)).toFixed(2)}`,
          title: tip(l, i),
          dataset: { launch: i },
          onclick: open(l),
        }),
      ),
    ),
    h("div", { class: "uv-timeline-key uv-dim" }, h("span", { class: "uv-key-memory" }, "■"), " memory-bound ", h("span", { class: "uv-key-compute" }, "■"), " compute-bound · brighter: nearer its roof"),
    h("div", { class: "uv-label" }, "By Tensor line ", h("span", { class: "uv-dim" }, "the line whose op made each kernel; a gradient's kernels under its forward op, marked backward")),
    h(
      "table",
      { class: "uv-beam-list uv-profile-lines" },
      h("thead", {}, h("tr", {}, ["line", "time", "share", "launches"].map((t) => h("th", {}, t)))),
      h(
        "tbody",
        {},
        byLine(p.launches).map((g) =>
          h(
            "tr",
            { class: "uv-line-row", title: g.line ? `${g.line.file}:${g.line.line} in ${g.line.function}\n  ${g.line.code.trim()}` : "", dataset: { key: g.key } },
            h("td", { class: "uv-line-where" }, lineText(g)),
            h("td", {}, formatSeconds(g.time_s)),
            h("td", {}, `${(g.share * 100).toFixed(1)}%`),
            h("td", {}, String(g.launches.length)),
          ),
        ),
      ),
    ),
    h("div", { class: "uv-label" }, "Launches ", h("span", { class: "uv-dim" }, "most time first")),
    h(
      "table",
      { class: "uv-beam-list uv-launches" },
      h(
        "thead",
        {},
        h("tr", {}, columns.map((t) => h("th", { class: `uv-col-${COLUMN_CLASS[t] ?? t}` }, t))),
      ),
      h(
        "tbody",
        {},
        byTime(p.launches).map((i) => {
          const l = p.launches[i];
          return h(
            "tr",
            { class: `uv-launch-row ${marks(l)}${l.context == null ? " uv-unrecorded" : ""}`, title: tip(l, i), dataset: { launch: i, ci: l.context ?? "" }, onclick: open(l) },
            h(
              "td",
              { class: "uv-launch-kernel" },
              kernelName(l.kernel, ctx.axisColors),
              // under its name, not a column of its own: the panel is narrow, and names already wrap
              l.context != null && h("button", { class: "uv-button uv-tune-kernel", title: "search this kernel's opts with BEAM (its BEAM tab)", onclick: tune(l.context) }, "tune"),
            ),
            makers && h("td", { class: "uv-launch-origin", title: originTitle(l.origin) }, originText(l.origin)),
            h("td", {}, formatSeconds(l.time_s)),
            h("td", {}, `${(l.share * 100).toFixed(1)}%`),
            h("td", {}, formatRate(l.gflops)),
            h("td", {}, formatRate(l.gbs)),
            h("td", { class: "uv-roof-cell" }, h("span", { class: "uv-roof" }, h("span", { class: "uv-roof-bar", style: `width:${Math.min(100, l.roof * 100).toFixed(1)}%` })), `${(l.roof * 100).toFixed(0)}%`),
          );
        }),
      ),
    ),
  );
}
