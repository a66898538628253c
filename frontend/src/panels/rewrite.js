// The Rewrite tab: the pass and step; for an opt pass the opt and the axes before and after it, else the rule that
// matched (its source location, text and time); what the step changed as a diff keyed by node identity (the match
// and its replacement, then the ancestors hash-consing rebuilt over them, folded); the pass's rules by time; and the
// graph as Python.
import { fill, h, textOn } from "../dom.js";
import { linearOf, listingDiff } from "../graph/listing.js";
import { highlight, highlightDiff } from "../highlight.js";
import { formatNs } from "../sidebar.js";
/** @import { PassInfo, RuleInfo, OptStep, Axis, StepView, Change } from "../../types/api" */
/** @import { PanelContext, PanelDef } from "../../types/ui" */

/** @type {PanelDef} */
export const rewritePanel = {
  id: "rewrite",
  title: "Rewrite",
  create: (el, ctx) => ({
    update: ({ pass, step, state, shown }) => pass && step && renderRewrite(el, pass, step, state.k, ctx, [shown.trace.id, shown.context.index, pass.index]),
    destroy: () => {},
  }),
};

const RULE_LINES = 8; // lines of a rule's source shown before the rest is folded
/** @type {Record<string, [string, string]>} */
const KINDS = { changed: ["~", "changed"], added: ["+", "added"], removed: ["−", "removed"] };

/**
 * @param {HTMLElement} el
 * @param {PassInfo} pass
 * @param {StepView} step
 * @param {number} k
 * @param {PanelContext} ctx
 * @param {[string, number, number]} at the step's trace, context and pass
 */
function renderRewrite(el, pass, step, k, ctx, at) {
  const reveal = ctx.selectNode;
  /** @type {(html: string, cls: string) => HTMLPreElement} */
  const code = (html, cls) => {
    const pre = h("pre", { class: `uv-code ${cls}` });
    pre.innerHTML = html;
    return pre;
  };
  /** @type {(label: string, id: string | null) => HTMLElement | "" | null} */
  const nodeChip = (label, id) => id && h("button", { class: "uv-chip", title: id, onclick: () => reveal(id) }, `${label} ${id.slice(0, 8)}`);
  const folded = step.folded.includes(k);
  const counts = { added: step.added.length, removed: step.removed.length, rebuilt: step.rebuilt.length };
  fill(
    el,
    h("div", { class: "uv-section-title" }, pass.name, h("span", { class: "uv-dim" }, pass.stage ?? "")),
    h(
      "div",
      { class: "uv-facts" },
      `step ${k} of ${pass.steps}`,
      h("span", { class: "uv-dim" }, ` · ${step.nodes.length} nodes · pass ${formatNs(pass.time_ns)}${step.folded.length ? ` · ${step.folded.length} step${step.folded.length === 1 ? "" : "s"} folded` : ""}`),
      !ctx.readOnly && h("button", { class: "uv-button uv-python-graph", title: "Python that rebuilds this graph", onclick: () => ctx.showPython() }, "as Python"),
    ),
    pass.error && h("div", { class: "uv-error" }, `This pass raised: ${pass.error}`),
    k === 0
      ? h("p", { class: "uv-hint" }, pass.steps ? "The graph the pass was given. Step forward (→) to see each rewrite; ↑ ↓ move between passes; ? lists every key." : "No rule of this pass matched: its output is its input. ↑ ↓ move between passes.")
      : [
          h(
            "div",
            { class: "uv-facts" },
            h("span", { class: "uv-added-text" }, `+${counts.added} added`),
            " ",
            h("span", { class: "uv-removed-text" }, `−${counts.removed} removed`),
            " ",
            h("span", { class: "uv-rebuilt-text" }, `${counts.rebuilt} rebuilt`),
            " ",
            nodeChip("match", step.match),
            nodeChip("→", step.replacement),
          ),
          folded && h("p", { class: "uv-hint uv-folded-hint" }, "Folded: this step changes nothing drawn. The rewriter met again a node that an earlier step of this pass had rewritten, and the graph shows that rewrite since that step. ← → skip such steps."),
          pass.opt ? optBlock(pass.opt) : ruleBlock(/** @type {RuleInfo} */ (step.rule), code), // a step after the first has a rule
          pass.opt && h("details", { class: "uv-rule-source" }, h("summary", {}, "the code that applies it ", h("code", { class: "uv-location" }, /** @type {RuleInfo} */ (step.rule).location)), code(highlight(/** @type {RuleInfo} */ (step.rule).text, "python"), "uv-rule")),
          !folded && linearOf(step) && listingBlock(step, k, ctx, at),
          !folded && diffBlock(step, reveal),
        ],
    profileBlock(pass),
  );
}

// The rule and its source; a long one (a whole-graph pass's function) folded after its first lines.
/**
 * @param {RuleInfo} rule
 * @param {(html: string, cls: string) => HTMLPreElement} code
 */
function ruleBlock(rule, code) {
  const lines = rule.text.split("\n");
  const head = h("div", { class: "uv-label" }, "Rule ", h("code", { class: "uv-location" }, rule.location), h("span", { class: "uv-dim" }, ` · ${formatNs(rule.time_ns)}`));
  if (lines.length <= RULE_LINES) return [head, code(highlight(rule.text, "python"), "uv-rule")];
  return [head, code(highlight(lines.slice(0, RULE_LINES).join("\n"), "python"), "uv-rule"), h("details", { class: "uv-rule-source" }, h("summary", {}, `all ${lines.length} lines`), code(highlight(rule.text, "python"), "uv-rule"))];
}

// An opt step: "SPLIT a1 (L1024) → L64 × u16", and the kernel's axes before and after.
/** @param {OptStep} opt */
function optBlock(opt) {
  /** @param {Axis[]} list */
  const axes = (list) =>
    h(
      "span",
      { class: "uv-axes" },
      list.map((a, i) => h("span", { class: "uv-axis uv-axis-small", style: `background:${a.color};color:${textOn(a.color)}`, title: `axis ${i}: ${a.type}` }, h("span", { class: "uv-axis-index" }, `a${i}`), `${a.letter}${a.size}`)),
    );
  return h(
    "div",
    { class: "uv-opt-step" },
    h("div", { class: "uv-label" }, "Opt"),
    h("div", { class: "uv-opt-text" }, opt.text),
    h("div", { class: "uv-opt-axes" }, h("span", { class: "uv-dim" }, "before "), axes(opt.before)),
    h("div", { class: "uv-opt-axes" }, h("span", { class: "uv-dim" }, "after "), axes(opt.after)),
  );
}

// A step of a Linear program: its listing before and after, as a diff (filled when the step before has loaded).
/**
 * @param {StepView} step
 * @param {number} k
 * @param {PanelContext} ctx
 * @param {[string, number, number]} at
 */
function listingBlock(step, k, ctx, at) {
  const pre = h("pre", { class: "uv-code uv-listing-diff" }, "…");
  ctx.step(...at, k - 1).then(
    (before) => {
      const diff = listingDiff(before, step);
      if (diff) pre.innerHTML = highlightDiff(diff);
      else pre.textContent = "The listing is the same.";
    },
    (err) => {
      pre.textContent = `the step before did not load: ${err.message}`;
    },
  );
  return [h("div", { class: "uv-label" }, "Listing ", h("span", { class: "uv-dim" }, "the program before and after this step, line by line")), pre];
}

// The step's diff by node identity: one row per node that changed, came or left; the rebuilt ancestors folded.
/**
 * @param {StepView} step
 * @param {(id: string) => void} reveal
 */
function diffBlock(step, reveal) {
  const listed = linearOf(step)?.linear.id; // the Linear node's row, a paragraph of operands: the listing says it
  const changes = step.changes.filter((c) => c.id !== listed);
  const main = changes.filter((c) => c.kind !== "rebuilt");
  const rebuilt = changes.filter((c) => c.kind === "rebuilt");
  /** @param {Change} c */
  const row = (c) =>
    h(
      "li",
      { class: `uv-change uv-change-${c.kind}`, dataset: { kind: c.kind, id: c.id }, onclick: () => reveal(c.id), title: c.id },
      h("span", { class: "uv-change-mark" }, (KINDS[c.kind] ?? ["·"])[0]),
      c.before_text ? h("span", { class: "uv-change-text" }, h("s", { class: "uv-change-before" }, c.before_text), h("br"), c.text) : h("span", { class: "uv-change-text" }, c.text),
    );
  const more = step.changed - step.changes.length;
  return [
    step.summary.length > 0 && [
      h("div", { class: "uv-label" }, "What changed ", h("span", { class: "uv-dim" }, "said once for the whole graph")),
      h("ul", { class: "uv-step-summary" }, step.summary.map((line) => h("li", {}, line))),
    ],
    h("div", { class: "uv-label" }, "Diff ", h("span", { class: "uv-dim" }, "by node: what the rule matched and what replaced it")),
    main.length ? h("ul", { class: "uv-changes" }, main.map(row)) : h("p", { class: "uv-hint" }, "No node came or left."),
    rebuilt.length > 0 &&
      h(
        "details",
        { class: "uv-rebuilt" },
        h("summary", {}, `${step.rebuilt.length} ancestors rebuilt over the new sources (the same nodes: hash-consing gives them new ids)`),
        h("ul", { class: "uv-changes" }, rebuilt.map(row)),
      ),
    more > 0 && h("p", { class: "uv-hint" }, `… and ${more} more nodes (a whole-graph pass changes them all).`),
  ];
}

// The pass's rules by the time spent in them.
/** @param {PassInfo} pass */
function profileBlock(pass) {
  if (!pass.rules.length) return null;
  return h(
    "details",
    { class: "uv-profile", open: pass.rules.length <= 3 },
    h("summary", {}, `Rules of this pass: ${pass.rules.length}, ${formatNs(pass.rules.reduce((t, r) => t + r.time_ns, 0))} in rules`),
    h(
      "table",
      { class: "uv-beam-list uv-profile-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "rule"), h("th", {}, "matches"), h("th", {}, "time"))),
      h(
        "tbody",
        {},
        pass.rules.map((r) => h("tr", {}, h("td", {}, h("code", { class: "uv-location" }, r.location)), h("td", {}, r.matches), h("td", {}, formatNs(r.time_ns)))),
      ),
    ),
  );
}
