import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { fill, h, icon, textOn, typing } from "../src/dom.js";

test("h: class, dataset, style, attributes (true: present, null and false: absent) and listeners", () => {
  const el = h("button", { class: "a b", dataset: { ci: 3, name: "x" }, style: "color: red", disabled: true, title: null, hidden: false, "aria-label": "go" });
  assert.equal(el.outerHTML, '<button class="a b" data-ci="3" data-name="x" style="color: red;" disabled="" aria-label="go"></button>');
  let clicks = 0;
  const live = h("button", { onclick: () => clicks++ });
  assert.equal(live.outerHTML, "<button></button>");
  live.click();
  live.click();
  assert.equal(clicks, 2);
});

test("h: children are nodes, text, numbers and nested lists; null, undefined and false are skipped", () => {
  const el = h("div", {}, "a", 0, null, undefined, false, [h("b", {}, "x"), ["y", [null, 2]]], "<i>");
  assert.equal(el.innerHTML, "a0<b>x</b>y2&lt;i&gt;");
});

test("fill replaces the children", () => {
  const el = h("div", {}, "old", h("span", {}, "gone"));
  assert.equal(fill(el, "new", [h("i", {}, "1")]), el);
  assert.equal(el.innerHTML, "new<i>1</i>");
  fill(el);
  assert.equal(el.childNodes.length, 0);
});

test("fill keeps the focus in the app: on the new input of the same class, else on the app", () => {
  const app = h("div", { tabindex: "0" });
  const body = h("div", {}, h("input", { class: "uv-search" }));
  app.append(body);
  document.body.append(app);
  /** @type {HTMLInputElement} */ (body.querySelector("input")).focus();
  fill(body, h("input", { class: "uv-search", value: "new" }));
  assert.equal(document.activeElement, body.querySelector("input"));
  // a focused button has no stand-in: the focus goes to the app, not to the page
  fill(body, h("button", { class: "uv-go" }));
  /** @type {HTMLButtonElement} */ (body.querySelector("button")).focus();
  fill(body, h("button", { class: "uv-go" }));
  assert.equal(document.activeElement, app);
  app.remove();
});

test("textOn: dark text on light backgrounds, white on dark ones", () => {
  assert.equal(textOn("#ffffff"), "#111");
  assert.equal(textOn("#ffff00"), "#111");
  assert.equal(textOn("#000000"), "#fff");
  assert.equal(textOn("#0000ff"), "#fff");
  assert.equal(textOn("#808080"), "#fff"); // mid grey is darker than it looks: luminance 0.216
  assert.equal(textOn("#8c8c8c"), "#111");
});

test("icon: a 16 px SVG of the given path", () => {
  const svg = icon("M0 0h16v16z");
  assert.equal(svg.namespaceURI, "http://www.w3.org/2000/svg");
  assert.equal(svg.getAttribute("viewBox"), "0 0 16 16");
  assert.equal(svg.querySelector("path")?.getAttribute("d"), "M0 0h16v16z");
});

test("typing: fields and editable elements take typed text; other elements and none do not", () => {
  const editor = h("div");
  editor.contentEditable = "true";
  document.body.append(editor);
  assert.deepEqual([h("input"), h("textarea"), h("select"), editor].map(typing), [true, true, true, true]);
  assert.deepEqual([h("div"), h("button"), document.body, null].map(typing), [false, false, false, false]);
  editor.remove();
});
