import "./dom-env.js";
import assert from "node:assert/strict";
import { test } from "node:test";
import { renderBeamLive } from "../src/panels/beam-live.js";
import { FakeModel, META } from "./fixtures.js";

// frames drawn at once (the view draws its events on the next animation frame)
Object.assign(globalThis, { requestAnimationFrame: (/** @type {() => void} */ fn) => (fn(), 0), cancelAnimationFrame: () => {} });

const total = { time_s: 1e-4, gflops: 5, gbs: 1, vs_unoptimized: 2 };
const summary = { program: "float32[64, 64] on CPU", device: "CPU", beam: 2, kernels: [], total: { unoptimized: total, heuristic: total, beam: total } };

test("a kernel whose opts came from the tuning database says so, not 'no candidates yet'; the device is named once", () => {
  const done = { seq: 1, kernel: 0, event: "done", search_id: 1, name: "r_4", opts: [], time_s: 1e-4, unoptimized_s: 2e-4, heuristic_s: 1e-4, rounds: 0, candidates: 0, from_db: true };
  const model = new FakeModel({ meta: META, kernels: ["r_64_64"], status: "done", label: "float32[64, 64] on CPU", events: [done], summary });
  const el = document.createElement("div");
  renderBeamLive(el, /** @type {any} */ (model));
  assert.match(el.querySelector(".uv-beam-status")?.textContent ?? "", /from the tuning database/);
  assert.equal(el.querySelector(".uv-beam-from-db")?.textContent, "No search ran: the tuning database had this kernel's best opts.");
  assert.equal(el.querySelector(".uv-beam-chart-box"), null);
  assert.equal(el.textContent?.match(/on CPU/g)?.length, 1);
});
