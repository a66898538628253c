// A BEAM search run from a notebook cell (uopviz.widget.beam.BeamView), live: the round, the candidates measured,
// the best time so far, the candidate chart of each kernel filling in, and at the end the results table
// (unoptimized, heuristic and BEAM times, GFLOP/s, GB/s, the opts chosen). The cell that runs the search keeps the
// kernel busy, so nothing is asked of it: events arrive as messages {beam: [event, ...]}, and the `events`
// traitlet holds them all at each round's end (for a view opened later, or a saved notebook).
import { fill, h } from "../dom.js";
import { kernelName } from "../names.js";
import { describeOpts } from "../opts.js";
import { beamChart, formatSeconds } from "./beam-chart.js";
import { pathTo, timed, whereLine } from "./beam.js";
/** @import { BeamEvent, Meta, Opt } from "../../types/api" */
/** @import { WidgetModel } from "../../types/ui" */
/** @import { Candidate, TimedCandidate } from "./beam.js" */
/** @typedef {BeamEvent & {seq: number, kernel: number}} LiveEvent an event of the kernel searched `kernel`-th */
/** @typedef {{time_s: number | null, gflops: number | null, gbs: number | null, vs_unoptimized: number | null}} Total */
/**
 * The results (uopviz/search/report.py), once the searches are done.
 * @typedef {{program: string, device: string, beam: number, kernels: {kernel: string, name: string, opts: Opt[]}[], total: Record<string, Total>}} Summary
 */

/** @type {[string, string][]} */
const VARIANTS = [
  ["unoptimized", "unoptimized"],
  ["heuristic", "heuristic"],
  ["beam", "BEAM"],
];

/**
 * @param {HTMLElement} el
 * @param {WidgetModel} model
 */
export function renderBeamLive(el, model) {
  /** @type {Meta} */
  const meta = model.get("meta");
  const axisColors = new Map(meta.axis_types.map((t) => [t.letter, t.color]));
  /** @type {Map<number, LiveEvent>} */
  const events = new Map(); // seq -> event
  /** @type {number | null} */
  let picked = null; // the kernel whose chart is shown (null: the latest)
  let frame = 0;
  el.classList.add("uv-app", "uv-beam-live");

  /** @param {LiveEvent[]} list */
  const take = (list) => {
    for (const e of list) events.set(e.seq, e);
    if (!frame) frame = requestAnimationFrame(() => ((frame = 0), render()));
  };
  /** @param {{beam?: LiveEvent[]}} msg */
  const onMessage = (msg) => msg.beam && take(msg.beam);
  const onEvents = () => take(model.get("events"));

  /** @param {number} i */
  function kernelView(i) {
    const mine = [...events.values()].filter((e) => e.kernel === i).sort((a, b) => a.seq - b.seq);
    /** @type {Candidate[]} */
    const candidates = mine
      .filter((e) => e.event === "candidate")
      .map((e) => ({ id: e.id, parent: e.parent, round: e.round, opts: e.opts, median_s: e.time_s, error: e.error, duplicate: e.duplicate, samples: [], built_on: e.built_on, measured_on: e.measured_on }));
    const best = candidates.filter(timed).reduce((b, c) => (b && b.median_s <= c.median_s ? b : c), /** @type {TimedCandidate | null} */ (null));
    const round = mine.filter((e) => e.event === "round").at(-1);
    const done = mine.find((e) => e.event === "done");
    const error = mine.find((e) => e.event === "error");
    const measured = mine.filter((e) => e.event === "candidate" && e.measured && e.round === round?.round).length;
    return {
      executor: mine.find((e) => e.event === "start")?.executor,
      round,
      measured,
      done,
      error,
      search: {
        candidates,
        best_id: best?.id ?? null,
        best_s: best?.median_s ?? null,
        winning_path: pathTo(candidates, best?.id),
        unoptimized_s: done?.unoptimized_s ?? candidates.find((c) => c.parent == null && timed(c))?.median_s ?? null,
      },
    };
  }

  function render() {
    /** @type {string[]} */
    const kernels = model.get("kernels");
    /** @type {string} */
    const status = model.get("status");
    const reached = Math.max(0, ...[...events.values()].map((e) => e.kernel));
    const shown = picked ?? reached;
    const k = kernelView(shown);
    const line =
      k.error?.detail ??
      (k.done
        ? `done: ${formatSeconds(k.done.time_s)} with ${describeOpts(meta, k.done.opts)}${k.done.from_db ? " (from the tuning database)" : ` after ${k.done.rounds} rounds, ${k.done.candidates} candidates`}`
        : k.round
          ? `round ${k.round.round} · ${k.measured}/${k.round.candidates} candidates measured · best ${formatSeconds(k.search.best_s)}${whereLine(k.executor, k.search.candidates)}`
          : "starting…");
    fill(
      el,
      h("div", { class: "uv-section-title" }, "BEAM search", h("span", { class: "uv-dim" }, ` ${model.get("label")} `), h("span", { class: `uv-beam-pill uv-pill-${status}` }, status)),
      h(
        "div",
        { class: "uv-axes uv-beam-kernels" },
        kernels.map((name, i) => h("button", { class: `uv-chip${i === shown ? " uv-active" : ""}`, dataset: { kernel: i }, onclick: () => ((picked = i), render()) }, kernelName(name, axisColors))),
      ),
      h("div", { class: `uv-beam-status${k.error ? " uv-error" : ""}`, dataset: { kernel: shown } }, status === "running" && !k.done && h("span", { class: "uv-beam-spinner" }), line),
      k.done?.from_db && !k.search.candidates.length
        ? h("p", { class: "uv-hint uv-beam-from-db" }, "No search ran: the tuning database had this kernel's best opts.")
        : h("div", { class: "uv-beam-chart-box" }, beamChart(k.search, { rounds: k.round?.round ?? 0, describe: (opts) => describeOpts(meta, opts), onPick: () => {} })),
      resultsTable(model.get("summary")),
    );
  }

  /** @param {Summary | null} doc */
  function resultsTable(doc) {
    if (!doc) return null;
    /** @param {number | null} x */
    const num = (x) => (x == null ? "–" : x.toFixed(2));
    return [
      h("div", { class: "uv-label" }, `Results, BEAM width ${doc.beam}`), // the title names the program and device
      h(
        "table",
        { class: "uv-beam-list uv-beam-results" },
        h("thead", {}, h("tr", {}, ["", "time", "GFLOP/s", "GB/s", "speedup"].map((t) => h("th", {}, t)))),
        h(
          "tbody",
          {},
          VARIANTS.map(([key, label]) => {
            const row = doc.total[key];
            return h("tr", { dataset: { variant: key } }, h("td", {}, label), h("td", {}, formatSeconds(row.time_s)), h("td", {}, num(row.gflops)), h("td", {}, num(row.gbs)), h("td", {}, row.vs_unoptimized ? `${num(row.vs_unoptimized)}×` : "–"));
          }),
        ),
      ),
      doc.kernels.map((r) => h("p", { class: "uv-hint uv-beam-chosen" }, kernelName(r.kernel, axisColors), " → ", kernelName(r.name, axisColors), `: ${describeOpts(meta, r.opts)}`)),
    ];
  }

  model.on("msg:custom", onMessage);
  model.on("change:events", onEvents);
  model.on("change:summary", render);
  model.on("change:status", render);
  onEvents();
  return () => {
    cancelAnimationFrame(frame);
    model.off("msg:custom", onMessage);
    model.off("change:events", onEvents);
    model.off("change:summary", render);
    model.off("change:status", render);
    el.replaceChildren();
  };
}
