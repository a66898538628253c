import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { commSource, createWidget } from "../src/widget.js";
import { FakeModel } from "./fixtures.js";

test("a request goes out with its method and arguments; the answer with its id settles it", async () => {
  const model = new FakeModel();
  const src = commSource(model);
  const a = src.step("t", 1, 2, 3);
  const b = src.meta();
  assert.deepEqual(model.sent, [
    { request: 0, method: "step", args: ["t", 1, 2, 3] },
    { request: 1, method: "meta", args: [] },
  ]);
  // answers may come in any order; an unknown id is ignored
  model.emit("msg:custom", { response: 1, ok: { version: "m" } });
  model.emit("msg:custom", { response: 9, ok: "stray" });
  model.emit("msg:custom", { response: 0, error: { status: 404, detail: "no step" } });
  assert.deepEqual(await b, { version: "m" });
  await assert.rejects(a, { name: "DataError", status: 404, message: "no step" });
});

test("closing the source rejects what is pending and stops listening", async () => {
  const model = new FakeModel();
  const src = commSource(model);
  const pending = src.traces();
  src.close();
  await assert.rejects(pending, { name: "DataError", status: 0, message: "the widget was closed" });
  assert.equal(model.handlers.get("msg:custom")?.size, 0);
});

test("beamEvents follows a job: its events in order, unfollowed at its end or when stopped", () => {
  const model = new FakeModel();
  const src = commSource(model);
  /** @type {unknown[]} */
  const got = [];
  src.beamEvents("j", (e) => got.push(e.seq));
  assert.deepEqual(model.sent, [{ follow: 0, job: "j" }]);
  model.emit("msg:custom", { events: 0, items: [{ seq: 1, event: "start" }, { seq: 2, event: "done" }, { seq: 3, event: "late" }] });
  model.emit("msg:custom", { events: 0, items: [{ seq: 4, event: "round" }] });
  assert.deepEqual(got, [1, 2]);
  assert.deepEqual(model.sent.at(-1), { unfollow: 0 });

  /** @type {unknown[]} */
  const other = [];
  const stop = src.beamEvents("k", (e) => other.push(e.seq));
  stop();
  stop(); // once
  model.emit("msg:custom", { events: 1, items: [{ seq: 1, event: "start" }] });
  assert.deepEqual(other, []);
  assert.deepEqual(model.sent.slice(1), [{ unfollow: 0 }, { follow: 1, job: "k" }, { unfollow: 1 }]);
});

// A stand-in for main.js's mount: records what the widget gives it and how it is driven.
function fakeMount() {
  const calls = { options: /** @type {any} */ (null), gone: /** @type {unknown[]} */ ([]), destroyed: false };
  const mount = /** @type {typeof import("../src/main.js").mount} */ (
    (_el, _source, options = {}) => {
      calls.options = options;
      return { go: (patch) => calls.gone.push(patch), destroy: () => (calls.destroyed = true) };
    }
  );
  return { mount, calls };
}
const el = () => document.createElement("div");
const TRAITS = { view: "app", height: 500, trace: "", context: -1, pass_index: 0, step: 0, opts: null, tab: "rewrite" };

test("the widget starts from its traitlets, 'none chosen' spelled as the traitlets spell it", () => {
  const { mount, calls } = fakeMount();
  const model = new FakeModel({ ...TRAITS, trace: "gemm", context: 2, pass_index: 4, step: 1, opts: [{ op: "NOLOCALS", axis: null, arg: null }] });
  createWidget(mount).render({ model, el: el() });
  assert.equal(calls.options.hash, false);
  assert.deepEqual(calls.options.initial, { tid: "gemm", ci: 2, pi: 4, k: 1, opts: [{ op: "NOLOCALS", axis: null, arg: null }], tab: "rewrite" });
  const fresh = fakeMount();
  createWidget(fresh.mount).render({ model: new FakeModel(TRAITS), el: el() });
  assert.deepEqual(fresh.calls.options.initial, { tid: null, ci: null, pi: 0, k: 0, opts: null, tab: "rewrite" });
});

test("the view's state is written to the traitlets that changed, saved once, and not echoed back", () => {
  const { mount, calls } = fakeMount();
  const model = new FakeModel(TRAITS);
  createWidget(mount).render({ model, el: el() });
  calls.options.onState({ tid: "gemm", ci: 0, pi: 0, k: 3, opts: null, tab: "rewrite", search: null });
  assert.deepEqual([model.traits.trace, model.traits.context, model.traits.step, model.saves], ["gemm", 0, 3, 1]);
  // the same state again writes nothing
  calls.options.onState({ tid: "gemm", ci: 0, pi: 0, k: 3, opts: null, tab: "rewrite", search: null });
  assert.equal(model.saves, 1);
  // a view with no trace chosen writes the traitlets' "none"
  calls.options.onState({ tid: null, ci: null, pi: 0, k: 3, opts: null, tab: "rewrite", search: null });
  assert.deepEqual([model.traits.trace, model.traits.context], ["", -1]);
  assert.deepEqual(calls.gone, []);
});

test("a traitlet Python changes moves the view; closing the view stops listening", () => {
  const { mount, calls } = fakeMount();
  const model = new FakeModel({ ...TRAITS, trace: "gemm", context: 0 });
  const cleanup = /** @type {() => void} */ (createWidget(mount).render({ model, el: el() }));
  model.pythonSets("step", 7);
  assert.deepEqual(calls.gone, [{ tid: "gemm", ci: 0, pi: 0, k: 7, opts: null, tab: "rewrite" }]);
  cleanup();
  assert.equal(calls.destroyed, true);
  model.pythonSets("step", 8);
  assert.equal(calls.gone.length, 1);
});

test("the view is a box of its own, so a Layout written over the widget's element keeps the view's height", () => {
  const { mount } = fakeMount();
  const host = el();
  createWidget(mount).render({ model: new FakeModel(TRAITS), el: host });
  host.style.cssText = "width: 50%;"; // what ipywidgets does with w.layout.width = "50%"
  const box = /** @type {HTMLElement} */ (host.firstElementChild);
  assert.equal(box.className, "uv-widget");
  assert.equal(box.style.height, "500px");
});

test("the live widget hides its static fallback outputs (by its fallback id), not another widget's", () => {
  const { mount } = fakeMount();
  const mine = Object.assign(document.createElement("div"), { className: "uopviz-static" });
  mine.dataset.widget = "f1";
  const other = Object.assign(document.createElement("div"), { className: "uopviz-static" });
  other.dataset.widget = "f2";
  document.body.append(mine, other);
  const host = el();
  createWidget(mount).render({ model: new FakeModel({ ...TRAITS, fallback: "f1" }), el: host });
  assert.equal(mine.style.display, "none");
  assert.equal(other.style.display, "");
  assert.equal(/** @type {HTMLElement} */ (host.firstElementChild).dataset.widget, "f1");
  mine.remove();
  other.remove();
});
