import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { kernelName } from "../src/names.js";

const COLORS = new Map([
  ["g", "#0000ff"],
  ["R", "#ff0000"],
]);

test("each axis of a kernel name in its AxisType's colour; a letter without one stays plain", () => {
  const el = kernelName("r_g33_L7_R5", COLORS);
  assert.equal(el.textContent, "r_g33_L7_R5");
  assert.equal(el.title, "r_g33_L7_R5");
  assert.equal(el.querySelector(".uv-kname-prefix")?.textContent, "r");
  assert.deepEqual(
    [...el.querySelectorAll(".uv-kname-axis")].map((a) => [a.textContent, /** @type {HTMLElement} */ (a).style.color]),
    [
      ["g33", "#0000ff"],
      ["R5", "#ff0000"],
    ],
  );
  // a break opportunity before each underscore, none inside an axis
  assert.equal(el.querySelectorAll("wbr").length, 3);
  assert.equal(el.querySelectorAll(".uv-kname-sep").length, 3);
});

test("parts that are no axis (a digest, a word) are plain text", () => {
  const el = kernelName("E_g4_x9ab_sum", COLORS);
  assert.equal(el.textContent, "E_g4_x9ab_sum");
  assert.deepEqual([...el.querySelectorAll(".uv-kname-axis")].map((a) => a.textContent), ["g4"]);
});

test("the label's suffix (kernels sharing a name) follows the name", () => {
  const el = kernelName("r_g33", COLORS, "r_g33 #2");
  assert.equal(el.textContent, "r_g33 #2");
  assert.equal(el.title, "r_g33 #2");
  assert.equal(el.querySelector(".uv-kname-suffix")?.textContent, " #2");
  // a name of one part, and a label that is not the name and a suffix
  assert.equal(kernelName("copy", COLORS, "copy #3").textContent, "copy #3");
  assert.equal(kernelName("r_g33", COLORS, "other").textContent, "r_g33");
});
