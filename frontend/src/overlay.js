// Overlays over the app: the keyboard help ("?") and a block of text to read or copy (a graph as Python). Esc or a
// click outside closes them; the app keeps the keys while one is open.
import { fill, h } from "./dom.js";
/** @import { Child } from "./dom.js" */

// [keys, what they do]: the app's shortcuts, listed by the help overlay.
/** @type {[string[], string][]} */
export const KEYS = [
  [["←", "→"], "previous / next step (folded steps are skipped)"],
  [["↑", "↓"], "previous / next pass"],
  [["Home", "End"], "first / last step"],
  [["/"], "search the graph (by op, id, range, arg, index text)"],
  [["Enter", "Shift+Enter"], "next / previous search hit"],
  [["f"], "fit the whole graph"],
  [["g"], "graph or instruction listing (Linearize and later)"],
  [["i"], "fold index arithmetic into its Index nodes"],
  [["c"], "collapse copies alike (lanes) into one node"],
  [["k"], "a schedule's Calls as boxes, their kernels folded, or drawn whole"],
  [["l"], "legend"],
  [["b"], "show or hide the sidebar"],
  [["Esc"], "close this, the inspector, or the search"],
  [["?"], "this help"],
];

export class Overlay {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.el = h("div", { class: "uv-overlay", hidden: true, role: "dialog", onclick: (/** @type {MouseEvent} */ e) => e.target === this.el && this.close() });
    root.append(this.el);
  }

  get open() {
    return !this.el.hidden;
  }

  close() {
    this.el.hidden = true;
    fill(this.el);
  }

  /**
   * @param {string} title
   * @param {...Child} body
   */
  show(title, ...body) {
    fill(this.el, h("div", { class: "uv-overlay-box" }, h("div", { class: "uv-overlay-head" }, h("b", {}, title), h("button", { class: "uv-close", title: "close (Esc)", onclick: () => this.close() }, "×")), body));
    this.el.hidden = false;
  }

  help() {
    this.show(
      "Keys",
      h(
        "dl",
        { class: "uv-keys" },
        KEYS.map(([keys, what]) => [h("dt", {}, keys.map((key) => h("kbd", {}, key))), h("dd", {}, what)]),
      ),
    );
  }

  // A text to read and copy (e.g. Python that rebuilds a graph).
  /**
   * @param {string} title
   * @param {string} text
   */
  text(title, text) {
    const pre = h("pre", { class: "uv-code uv-overlay-text" }, text);
    const copy = h("button", { class: "uv-button uv-copy", onclick: () => navigator.clipboard?.writeText(text).then(() => (copy.textContent = "copied"), () => (copy.textContent = "select the text to copy it")) }, "copy");
    this.show(title, copy, pre);
  }
}
