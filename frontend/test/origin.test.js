import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { renderInspector } from "../src/graph/inspector.js";
import { renderListing } from "../src/graph/listing.js";
import { originText, originTitle } from "../src/graph/origin.js";
import { node, step } from "./fixtures.js";

const softmax = { op: "Tensor.softmax", file: "/home/me/model.py", line: 42, function: "forward", code: "    y = x.softmax()", grad_of: null };
const backward = { op: "Tensor.backward", file: "/home/me/train.py", line: 7, function: "<module>", code: "loss.backward()", grad_of: softmax };

test("a node's origin in one line: the op and the file's last part, or the forward op a gradient is of", () => {
  assert.equal(originText(softmax), "softmax at model.py:42");
  assert.equal(originText(backward), "gradient of softmax at model.py:42");
  assert.equal(originText({ ...softmax, file: "Cell In[3]", op: "Linear.__call__" }), "Linear.__call__ at Cell In[3]:42");
  assert.equal(originText(null), "");
  assert.equal(originTitle(backward), "/home/me/train.py:7 in <module>\n  loss.backward()\ngradient of:\n/home/me/model.py:42 in forward\n  y = x.softmax()");
});

test("the inspector says what made the node; a node without an origin has no such row", () => {
  const el = document.createElement("div");
  const n = node("a", "Mul", [], { origin: backward });
  renderInspector(el, { node: n, drawn: null, table: new Map([["a", n]]), select: () => {} });
  assert.equal(el.querySelector(".uv-origin")?.textContent, "gradient of softmax at model.py:42");
  const bare = node("b", "Mul");
  renderInspector(el, { node: bare, drawn: null, table: new Map([["b", bare]]), select: () => {} });
  assert.equal(el.querySelector(".uv-origin"), null);
});

test("each listing line ends with its origin as a comment, dimmed where the line above says the same", () => {
  const el = document.createElement("div");
  const program = [
    node("lin", "Linear", ["p", "ld", "st"], { dtype: "void" }),
    node("p", "Param", [], { arg: "slot 0" }),
    node("ld", "Load", ["p"], { origin: softmax }),
    node("st", "Store", ["p", "ld"], { origin: softmax }),
  ];
  renderListing(el, step(program), () => undefined, () => {}, null);
  const comments = [...el.querySelectorAll(".uv-line")].map((l) => [l.querySelector(".uv-line-origin")?.textContent ?? null, l.querySelector(".uv-same") != null]);
  assert.deepEqual(comments, [[null, false], ["// softmax at model.py:42", false], ["// softmax at model.py:42", true]]);
});
