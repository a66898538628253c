// The BEAM chart: each candidate of a search is a dot at its round (x) and median time (y, log scale). Candidates
// that failed are red crosses and those whose program repeats an earlier one hollow dots, each in a band above
// the plot (they have no time); the winning path is a line through its candidates, the best one ringed, and the
// unoptimized kernel's time a dashed line, the heuristic's candidate named beside its dot. A click on a candidate
// picks it.
import { select } from "d3-selection";
import { formatOpts } from "../opts.js";
/** @import { Selection } from "d3-selection" */
/** @import { CandidateView, Opt } from "../../types/api" */
/** @typedef {Pick<CandidateView, "id" | "parent" | "round" | "opts" | "error" | "median_s">} Candidate what the chart reads of a candidate */
/** @typedef {{candidates: Candidate[], best_id: number | null, winning_path: number[], unoptimized_s: number | null}} ChartSearch */

const W = 440;
const H = 290;
const M = { left: 64, right: 14, top: 50, bottom: 30 };
const FAILED_Y = 14;
const REPEAT_Y = 32;

/** @param {number | null | undefined} s */
export function formatSeconds(s) {
  if (s == null) return "–";
  if (s < 1e-3) return `${(s * 1e6).toFixed(s < 1e-5 ? 2 : 1)} µs`;
  if (s < 1) return `${(s * 1e3).toFixed(2)} ms`;
  return `${s.toFixed(3)} s`;
}

// Round 0 measures the unoptimized kernel (no parent) and the heuristic's opts (its child, all opts at once); every
// later candidate adds one opt to its parent, except in the search's last round, which times the winner, the
// heuristic's and the unoptimized kernels again (each a child with its parent's opts): "re-timed".
/**
 * @param {Pick<CandidateView, "parent" | "round" | "opts">} c
 * @param {Pick<CandidateView, "opts"> | null | undefined} parent
 * @returns {"unoptimized" | "heuristic" | "re-timed" | "step"}
 */
export function candidateKind(c, parent) {
  if (c.parent == null) return "unoptimized";
  if (c.round === 0) return "heuristic";
  return parent && formatOpts(parent.opts) === formatOpts(c.opts) ? "re-timed" : "step";
}

// Round numbers (1, 2, 5 × 10^k) inside [lo, hi]; the ends and their geometric middle when the range holds none.
/**
 * @param {number} lo
 * @param {number} hi
 */
function logTicks(lo, hi) {
  const ticks = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of [1, 2, 5]) {
      const t = m * 10 ** e;
      if (t >= lo && t <= hi) ticks.push(t);
    }
  }
  return ticks.length >= 2 ? ticks : [lo * 1.1, Math.sqrt(lo * hi), hi / 1.1];
}

// search: {candidates, best_id, winning_path, unoptimized_s}; rounds: how many rounds to make room for
// (a live search's current round may have no candidate yet); describe(opts): their text. Returns the <svg>.
/**
 * @param {ChartSearch} search
 * @param {{rounds?: number, picked?: number | null, onPick: (id: number) => void, describe: (opts: Opt[]) => string}} options
 * @returns {SVGSVGElement}
 */
export function beamChart(search, { rounds = 0, picked = null, onPick, describe }) {
  const svg = select(document.createElementNS("http://www.w3.org/2000/svg", "svg"))
    .attr("class", "uv-beam-chart")
    .attr("viewBox", `0 0 ${W} ${H}`)
    .attr("role", "img")
    .attr("aria-label", "candidate times per round");
  const cands = search.candidates;
  const last = Math.max(rounds, ...cands.map((c) => c.round));
  const band = (W - M.left - M.right) / (last + 1);
  const timed = cands.filter((c) => c.error == null && c.median_s != null);
  const times = timed.map((c) => /** @type {number} */ (c.median_s));
  const lo = times.length ? Math.min(...times) / 1.3 : 1e-6;
  const hi = times.length ? Math.max(...times) * 1.3 : 1e-3;
  /** @param {number} t */
  const y = (t) => M.top + ((Math.log(hi) - Math.log(t)) / (Math.log(hi) - Math.log(lo))) * (H - M.top - M.bottom);

  // Each round's candidates spread across its band, in the order they were measured.
  /** @type {Map<number, number>} */
  const x = new Map();
  for (let r = 0; r <= last; r++) {
    const inRound = cands.filter((c) => c.round === r);
    inRound.forEach((c, i) => x.set(c.id, M.left + band * (r + 0.5) + (inRound.length > 1 ? (i / (inRound.length - 1) - 0.5) * band * 0.72 : 0)));
  }

  const axis = svg.append("g").attr("class", "uv-beam-axis");
  for (const t of logTicks(lo, hi)) {
    axis.append("line").attr("class", "uv-beam-grid").attr("x1", M.left).attr("x2", W - M.right).attr("y1", y(t)).attr("y2", y(t));
    axis.append("text").attr("x", M.left - 6).attr("y", y(t) + 3).attr("text-anchor", "end").text(formatSeconds(t));
  }
  for (const [label, at, title] of /** @type {[string, number, string][]} */ ([
    ["failed", FAILED_Y, "candidates that did not build, run or give the right answer"],
    ["repeat", REPEAT_Y, "candidates whose program is an earlier one's (not timed again)"],
  ])) {
    axis.append("line").attr("class", "uv-beam-band").attr("x1", M.left).attr("x2", W - M.right).attr("y1", at).attr("y2", at);
    axis.append("text").attr("x", M.left - 6).attr("y", at + 3).attr("text-anchor", "end").text(label).append("title").text(title);
  }
  for (let r = 0; r <= last; r++) {
    const cx = M.left + band * (r + 0.5);
    if (r > 0) axis.append("line").attr("class", "uv-beam-sep").attr("x1", M.left + band * r).attr("x2", M.left + band * r).attr("y1", FAILED_Y - 8).attr("y2", H - M.bottom);
    axis.append("text").attr("x", cx).attr("y", H - M.bottom + 16).attr("text-anchor", "middle").text(r);
  }
  axis.append("text").attr("class", "uv-beam-axis-title").attr("x", W - M.right).attr("y", H - 2).attr("text-anchor", "end").text("round");
  if (search.unoptimized_s != null) {
    const uy = y(search.unoptimized_s);
    axis.append("line").attr("class", "uv-beam-ref").attr("x1", M.left).attr("x2", W - M.right).attr("y1", uy).attr("y2", uy);
    axis.append("text").attr("class", "uv-beam-ref-label").attr("x", W - M.right - 2).attr("y", uy - 4).attr("text-anchor", "end").text("unoptimized");
  }
  if (!cands.length) {
    svg.append("text").attr("class", "uv-beam-empty").attr("x", (M.left + W - M.right) / 2).attr("y", (M.top + H - M.bottom) / 2).attr("text-anchor", "middle").text("no candidates yet");
  }

  const onPath = new Set(search.winning_path);
  const pathPoints = search.winning_path.filter((id) => x.has(id) && timed.some((c) => c.id === id)).map((id) => `${x.get(id)},${y(/** @type {number} */ (/** @type {Candidate} */ (cands.find((c) => c.id === id)).median_s))}`);
  if (pathPoints.length > 1) svg.append("path").attr("class", "uv-beam-path").attr("d", `M${pathPoints.join("L")}`);

  const dots = svg.append("g").attr("class", "uv-beam-dots");
  // Path candidates last, so they are drawn over the rest.
  for (const c of [...cands].sort((a, b) => Number(onPath.has(a.id)) - Number(onPath.has(b.id)))) {
    /** @param {string} base */
    const cls = (base) => `${base}${onPath.has(c.id) ? " uv-on-path" : ""}${c.id === search.best_id ? " uv-best" : ""}${c.id === picked ? " uv-picked" : ""}`;
    /** @type {Selection<any, any, null, undefined>} */
    let mark;
    if (c.error != null) {
      const [cx, s] = [/** @type {number} */ (x.get(c.id)), 4];
      mark = dots.append("path").attr("class", cls("uv-beam-failed")).attr("d", `M${cx - s},${FAILED_Y - s}L${cx + s},${FAILED_Y + s}M${cx - s},${FAILED_Y + s}L${cx + s},${FAILED_Y - s}`);
    } else if (c.median_s == null) {
      mark = dots.append("circle").attr("class", cls("uv-beam-repeat")).attr("cx", /** @type {number} */ (x.get(c.id))).attr("cy", REPEAT_Y).attr("r", 3.5);
    } else {
      mark = dots.append("circle").attr("class", cls("uv-beam-dot")).attr("cx", /** @type {number} */ (x.get(c.id))).attr("cy", y(c.median_s)).attr("r", c.id === search.best_id ? 6 : onPath.has(c.id) ? 5 : 3.5);
    }
    mark.attr("data-id", c.id).attr("data-round", c.round);
    if (candidateKind(c, null) === "heuristic" && c.error == null && c.median_s != null) {
      dots.append("text").attr("class", "uv-beam-dot-label").attr("data-id", c.id).attr("x", /** @type {number} */ (x.get(c.id)) + 7).attr("y", y(c.median_s) - 6).text("heuristic");
    }
    mark.append("title").text(`#${c.id} round ${c.round}: ${describe(c.opts)}\n${c.error ?? (c.median_s == null ? "same program as an earlier candidate" : formatSeconds(c.median_s))}`);
  }
  svg.on("click", (event) => {
    const el = event.target.closest("[data-id]");
    if (el) onPick(Number(el.dataset.id));
  });
  return /** @type {SVGSVGElement} */ (svg.node());
}
