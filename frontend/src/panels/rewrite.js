// The Rewrite tab: the pass and step, the rule that matched (its source location and text), what the
// step changed, and the text diff of the matched subtree.
import { fill, h } from "../dom.js";
import { highlight, highlightDiff } from "../highlight.js";

export const rewritePanel = {
  id: "rewrite",
  title: "Rewrite",
  create: (el, ctx) => ({
    update: ({ pass, step, state }) => pass && step && renderRewrite(el, pass, step, state.k, ctx.selectNode),
    destroy: () => {},
  }),
};

function renderRewrite(el, pass, step, k, reveal) {
  const code = (html, cls) => {
    const pre = h("pre", { class: `uv-code ${cls}` });
    pre.innerHTML = html;
    return pre;
  };
  const nodeChip = (label, id) => id && h("button", { class: "uv-chip", title: id, onclick: () => reveal(id) }, `${label} ${id.slice(0, 8)}`);
  fill(
    el,
    h("div", { class: "uv-section-title" }, pass.name, h("span", { class: "uv-dim" }, pass.stage ?? "")),
    h("div", { class: "uv-facts" }, `step ${k} of ${pass.steps}`, h("span", { class: "uv-dim" }, ` · ${step.nodes.length} nodes in the table`)),
    pass.error && h("div", { class: "uv-error" }, `This pass raised: ${pass.error}`),
    k === 0
      ? h("p", { class: "uv-hint" }, pass.steps ? "The graph the pass was given. Step forward (→) to see each rewrite; ↑ ↓ move between passes." : "No rule of this pass matched: its output is its input. ↑ ↓ move between passes.")
      : [
          h(
            "div",
            { class: "uv-facts" },
            h("span", { class: "uv-added-text" }, `+${step.added.length} added`),
            " ",
            h("span", { class: "uv-removed-text" }, `−${step.removed.length} removed`),
            " ",
            nodeChip("match", step.match),
            nodeChip("→", step.replacement),
          ),
          !step.added.length &&
            !step.removed.length &&
            h("p", { class: "uv-hint" }, "The graph is unchanged by this step: the node it matched is not in the graph as replayed. The rule and its diff below show the rewrite."),
          step.rule && [
            h("div", { class: "uv-label" }, "Rule ", h("code", { class: "uv-location" }, step.rule.location)),
            code(highlight(step.rule.text, "python"), "uv-rule"),
          ],
          step.diff && [h("div", { class: "uv-label" }, "Diff of the matched subtree"), code(highlightDiff(step.diff), "uv-diff")],
        ],
  );
}
