// A data source over answers computed ahead of time (a static export: `uopviz export`, Trace.to_html, a widget's
// saved output). The export holds every answer a read-only view asks for, by request key, as gzipped JSON in
// base64; the browser unzips it itself (DecompressionStream), so the page needs no network and no server. A step
// lists its nodes by id, each node once in the table "nodes". Asking for anything else (an opt, a search: a
// route the table does not mark static) rejects: a static view is read-only.
import { DataError } from "./data.js";
import { ROUTES } from "./routes.js";
/** @import { DataSource, RouteSpec } from "../types/api" */

// A request's key, as the export writes it (backend/routes.py's key()): the method and every argument of its
// route, "*" for one that is null or left out.
/** @type {(route: RouteSpec, args: unknown[]) => string} */
const key = (route, args) => [route.method, ...route.args.map((_, i) => (args[i] == null ? "*" : String(args[i])))].join("/");

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
  /** @type {(route: RouteSpec) => (...args: unknown[]) => Promise<any>} */
  const method = (route) => (route.static ? (...args) => get(key(route, args)) : readOnly);
  const source = /** @type {DataSource} */ (/** @type {unknown} */ (Object.fromEntries(ROUTES.map((r) => [r.method, method(r)]))));
  return {
    ...source,
    step: async (tid, ci, pi, k) => {
      const step = await source.step(tid, ci, pi, k);
      return { ...step, nodes: step.nodes.map((id) => answers.nodes[/** @type {string} */ (/** @type {unknown} */ (id))]) };
    },
    beamEvents: (job, onEvent) => {
      onEvent({ event: "error", kind: "failed", detail: "a static view runs no searches" });
      return () => {};
    },
  };
}
