// A data source over answers computed ahead of time (a static export: `uopviz export`, Trace.to_html, a widget's
// saved output). The export holds every answer a read-only view asks for, by request key, as gzipped JSON in
// base64; the browser unzips it itself (DecompressionStream), so the page needs no network and no server. A step
// lists its nodes by id, each node once in the table "nodes". Asking for anything else (an opt, a search)
// rejects: a static view is read-only.
import { DataError } from "./data.js";
/** @import { DataSource } from "../types/api" */

// The request keys the export writes (uopviz/widget/export.py spells the same).
/** @param {...(string | number | null)} parts */
const key = (...parts) => parts.map((p) => (p == null ? "*" : String(p))).join("/");

/**
 * @param {string} base64
 * @returns {Promise<Record<string, any>>}
 */
async function unzip(base64) {
  const bytes = Uint8Array.from(atob(base64.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

/**
 * @param {string} base64 the export's answers: gzipped JSON, in base64
 * @returns {Promise<DataSource>}
 */
export async function staticSource(base64) {
  const answers = await unzip(base64);
  /** @param {string} k */
  const get = async (k) => {
    if (!(k in answers)) throw new DataError(404, `this static view holds no ${k.split("/")[0]} ${k.split("/").slice(1).join("/")}`);
    return answers[k];
  };
  const readOnly = async () => {
    throw new DataError(405, "a static view is read-only: open the trace with uopviz (uopviz.show, uopviz serve) to change it");
  };
  return {
    meta: () => get("meta"),
    traces: () => get("traces"),
    trace: (tid) => get(key("trace", tid)),
    step: async (tid, ci, pi, k) => {
      const step = await get(key("step", tid, ci, pi, k));
      return { ...step, nodes: step.nodes.map((/** @type {string} */ id) => answers.nodes[id]) };
    },
    kernel: (tid, ci) => get(key("kernel", tid, ci)),
    searches: (kernelHash = null) => get(key("searches", kernelHash)), // one page: the export holds them all
    search: (sid) => get(key("search", sid)),
    results: (kernelHash = null) => get(key("results", kernelHash)),
    applyOpts: readOnly,
    startBeam: readOnly,
    python: readOnly,
    timeKernel: readOnly,
    machineCode: readOnly,
    beamEvents: (job, onEvent) => {
      onEvent({ event: "error", kind: "failed", detail: "a static view runs no searches" });
      return () => {};
    },
  };
}
