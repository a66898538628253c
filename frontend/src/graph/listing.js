// The instruction listing of a step whose graph is a Linear program (Linearize and later; under a Program after
// Render): one numbered line per instruction, operands as %n, what the step added or rebuilt marked, and a click on
// a line selecting its node; each line ends with what made it (the Tensor op and user line) as a comment. A linear program is read top to bottom, which its graph (every instruction a source of
// the Linear node) cannot show.
import { fill, h } from "../dom.js";
import { editScript, formatDiff } from "../text-diff.js";
import { originText, originTitle } from "./origin.js";
/** @import { GraphNode, StepView } from "../../types/api" */
/** @import { Op } from "../text-diff.js" */

// The Linear node of a step's graph (the root, or the Program's first source), or null.
/**
 * @param {{nodes: GraphNode[], root?: string}} step
 * @returns {{linear: GraphNode, table: Map<string, GraphNode>} | null}
 */
export function linearOf(step) {
  const table = new Map(step.nodes.map((n) => [n.id, n]));
  const root = table.get(/** @type {string} */ (step.root)); // (none: no root, no Linear)
  const linear = root?.op === "Program" ? table.get(root.src[0]) : root;
  return linear?.op === "Linear" ? { linear, table } : null;
}

// The listing's lines: every instruction but constants, which are written where they are used (a program opens with
// its constants, two dozen lines that say nothing alone), each indented by the loops open around it (a Range opens
// one, its End closes it), its operands as %n (the instruction numbers stay the program's own).
/**
 * @param {GraphNode} linear
 * @param {Map<string, GraphNode>} table
 * @returns {{id: string, no: number, depth: number, node: GraphNode, operands: string[]}[]}
 */
export function listingLines(linear, table) {
  const number = new Map(linear.src.map((id, i) => [id, i]));
  /** @param {string} s */
  const operand = (s) => {
    const n = table.get(s);
    if (n?.op === "Const") return n.arg;
    return number.has(s) ? `%${number.get(s)}` : (n?.op ?? "?");
  };
  let depth = 0;
  /** @type {{id: string, no: number, depth: number, node: GraphNode, operands: string[]}[]} */
  const out = [];
  linear.src.forEach((id, i) => {
    const n = /** @type {GraphNode} */ (table.get(id));
    if (n.op === "End") depth = Math.max(0, depth - 1);
    if (n.op !== "Const") out.push({ id, no: i, depth, node: n, operands: n.src.map(operand) });
    if (n.op === "Range") depth += 1;
  });
  return out;
}

// A listing line as text (a diff's line): indented by its loops, the op, its type, operands and arg.
/** @param {{depth: number, node: GraphNode, operands: string[]}} line */
export function lineText({ depth, node: n, operands }) {
  const shape = n.shape?.length ? `(${n.shape.join(",")})` : "";
  return [`${"  ".repeat(depth)}${n.op}`, `${n.dtype ?? ""}${shape}`, operands.join(" "), n.arg].filter(Boolean).join("  ");
}

// What a step did to a Linear program, as a unified diff of its listings (the graph's diff of the Linear node is
// one paragraph of operands): lines matched by node identity, not text, since one inserted instruction renumbers
// every operand after it; a node the step rebuilt or replaced is the same line. `before`: the step before (a graph
// not yet linear: every line is new). "" when the listing did not change.
/**
 * @param {{nodes: GraphNode[], root?: string} | null} before
 * @param {StepView} after
 */
export function listingDiff(before, after) {
  const now = /** @type {NonNullable<ReturnType<typeof linearOf>>} */ (linearOf(after));
  const was = before ? linearOf(before) : null;
  const renamed = new Map([...(after.rebuilt ?? []), ...after.changes.flatMap((c) => (c.before ? [/** @type {[string, string]} */ ([c.before, c.id])] : []))]);
  /** @param {{linear: GraphNode, table: Map<string, GraphNode>}} l */
  const lines = (l) => new Map(listingLines(l.linear, l.table).map((line) => [line.id, lineText(line)]));
  const b = lines(now);
  const a = was ? new Map([...lines(was)].map(([id, text]) => [renamed.get(id) ?? id, text])) : new Map();
  /** @type {(kind: " " | "-" | "+", id: string) => Op[]} a line kept whose text the step changed: out, then in */
  const line = (kind, id) => {
    const [old, text] = [a.get(id), b.get(id)];
    if (kind === "-") return [["-", /** @type {string} */ (old)]];
    return kind === " " && old !== text ? [["-", /** @type {string} */ (old)], ["+", /** @type {string} */ (text)]] : [[kind, /** @type {string} */ (text)]];
  };
  const ops = editScript([...a.keys()], [...b.keys()]).flatMap(([kind, id]) => line(kind, id));
  return formatDiff(foldRepeats(ops), ["before", "after"], 2);
}

const RUN = 3; // alike lines in a row from which a listing says them once, with how many

// Lines of an edit script alike and in a row said once, "×n" after them (a kernel's registers: 60 `+Buffer
// float32(16) REG` lines).
/** @param {Op[]} ops */
export function foldRepeats(ops) {
  /** @type {[Op, number][]} */
  const runs = [];
  for (const op of ops) {
    const last = runs.at(-1);
    if (last && last[0][0] === op[0] && last[0][1] === op[1]) last[1] += 1;
    else runs.push([op, 1]);
  }
  return runs.flatMap(([[kind, text], n]) => (n >= RUN ? [/** @type {Op} */ ([kind, `${text}  ×${n}`])] : Array(n).fill([kind, text])));
}

// The listing's lines in runs: declarations alike (no operands; the same op, type and arg at one depth) in a row
// make one run, every other line one of its own.
/**
 * @template {{depth: number, node: GraphNode, operands: string[]}} L
 * @param {L[]} lines
 * @returns {L[][]}
 */
export function runsOfAlike(lines) {
  /** @param {L} l */
  const key = ({ depth, node: n, operands }) => (operands.length ? null : JSON.stringify([depth, n.op, n.dtype, n.shape, n.arg]));
  /** @type {L[][]} */
  const out = [];
  for (const line of lines) {
    const last = out.at(-1);
    const k = key(line);
    if (last && k !== null && key(last[0]) === k) last.push(line);
    else out.push([line]);
  }
  return out;
}

// Draws the listing into `el`; opColor(op) is an op's group colour, select(id) selects a node.
/**
 * @param {HTMLElement} el
 * @param {StepView} step a step whose graph is a Linear program (linearOf)
 * @param {(op: string) => string | undefined} opColor
 * @param {(id: string) => void} select
 * @param {string | null} selected
 */
export function renderListing(el, step, opColor, select, selected) {
  const { linear, table } = /** @type {NonNullable<ReturnType<typeof linearOf>>} */ (linearOf(step));
  const width = String(linear.src.length - 1).length;
  const marks = new Map(/** @type {[string, string][]} */ ([...step.added.map((id) => [id, "added"]), ...(step.rebuilt ?? []).map(([, id]) => [id, "rebuilt"])]));
  let made = "";
  /**
   * @param {ReturnType<typeof listingLines>[number]} line
   * @param {string} [text] what the operand column says
   * @param {boolean} [head] a run's head: a click opens the run (its summary's), selecting nothing
   */
  const row = ({ id, no, depth, node: n, operands }, text = operands.join(" "), head = false) => {
    const shape = n.shape?.length ? `(${n.shape.join(",")})` : "";
    const mark = marks.get(id);
    const origin = originText(n.origin);
    const same = origin === made; // the line above says it already: dimmed
    made = origin;
    return h(
      "div",
      head
        ? { class: "uv-line uv-line-run-head", dataset: { depth } }
        : { class: `uv-line${mark ? ` uv-${mark}` : ""}${id === selected ? " uv-selected" : ""}`, dataset: { ref: id, depth }, onclick: () => select(id) },
      h("span", { class: "uv-line-no" }, String(no).padStart(width)),
      h("span", { class: "uv-line-op", style: `color:${opColor(n.op) ?? "inherit"};padding-left:${2 * depth}ch` }, n.op),
      h("span", { class: "uv-line-type" }, `${n.dtype ?? ""}${shape}`),
      h("span", { class: "uv-line-src" }, text),
      h("span", { class: "uv-line-arg" }, n.arg),
      origin && h("span", { class: `uv-line-origin${same ? " uv-same" : ""}`, title: originTitle(n.origin) }, `// ${origin}`),
    );
  };
  const all = listingLines(linear, table);
  // a run of alike declarations is one line ("×60 alike: %35‥%120") that opens to its lines
  const lines = runsOfAlike(all).map((run) => {
    if (run.length < RUN) return run.map((line) => row(line));
    const head = row(run[0], `×${run.length} alike: %${run[0].no}‥%${/** @type {typeof run[0]} */ (run.at(-1)).no}`, true);
    const open = run.some((l) => l.id === selected);
    return h("details", { class: "uv-line-run", open }, h("summary", {}, head), run.map((line) => row(line)));
  });
  const removed = step.removed.length;
  const consts = linear.src.length - all.length;
  el.dataset.key = step.root;
  fill(
    el,
    h(
      "div",
      { class: "uv-listing-head" },
      `${linear.src.length} instructions`,
      consts ? h("span", { class: "uv-dim" }, ` · ${consts} constants written where they are used`) : null,
      step.added.length || removed ? h("span", { class: "uv-dim" }, ` · this step: +${step.added.length} −${removed}`) : null,
    ),
    h("div", { class: "uv-listing-lines" }, lines),
  );
}
