// The UI reads everything through a data source: an object with an async method per route of the route table
// (routes.js, written from backend/routes.py: meta, traces, trace, step, python, kernel, timeKernel, machineCode,
// applyOpts, searches, search, results, startBeam, stopBeam). A method takes its route's arguments in the table's
// order, resolves to the JSON of that `uopviz serve` route and rejects with a DataError (status, detail).
//
// And one subscription: beamEvents(job, onEvent) calls onEvent with each progress event of a BEAM job (the
// JSON of GET /api/beam/{job}/events, from its first event on, each once), ending with a "done" or an
// "error" event, and returns a function that stops it. A lost connection ends it with an error event.
//
// httpSource(base, token) implements it over HTTP, sending the server's token (pageToken()) as a header on every
// request, the event stream included; the Jupyter widget implements the same methods over its comm.
import { ROUTES } from "./routes.js";
/** @import { BeamEvent, DataSource, RouteSpec } from "../types/api" */

export class DataError extends Error {
  /**
   * @param {number} status the HTTP status (0: no answer)
   * @param {unknown} detail FastAPI's detail
   */
  constructor(status, detail) {
    super(describe(detail));
    this.name = "DataError";
    this.status = status;
    this.detail = detail;
  }
}

// FastAPI's detail is a string, or for request validation a list of {loc, msg}.
/** @param {unknown} detail */
function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d) => (d.loc ? `${d.loc.join(".")}: ${d.msg}` : d.msg ?? JSON.stringify(d))).join("; ");
  return JSON.stringify(detail);
}

const TOKEN_KEY = "uopviz-token";
const STREAM_RETRIES = 5; // reconnections of an event stream in a row before it counts as lost
const STREAM_RETRY_MS = 1000;

// The token of the `uopviz serve` this page came from. The printed URL carries it as ?token=; it is taken out of
// the address bar (and so of the history) and kept in this origin's localStorage, which no other port's page can
// read, so a reload or another tab of this server has it. A cookie would be sent to every port of the host, and so
// to another user's server; the token goes only in the Authorization header of this page's own requests.
export function pageToken(storage = globalThis.localStorage, where = globalThis.location, hist = globalThis.history) {
  const url = new URL(where.href);
  const given = url.searchParams.get("token");
  if (given != null) {
    url.searchParams.delete("token");
    hist.replaceState(hist.state, "", url.pathname + url.search + url.hash);
    try {
      storage.setItem(TOKEN_KEY, given);
    } catch {
      return given; // storage refused (a private window's quota): this page alone has it
    }
    return given;
  }
  try {
    return storage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

// The events of a server-sent event stream's body, each `data:` field (its lines joined) once a blank line ends it;
// comments (`:`) and the other fields are skipped.
/**
 * @param {ReadableStream<BufferSource>} body
 * @returns {AsyncGenerator<string, void>}
 */
export async function* sseData(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "";
  /** @type {string[]} */
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    const text = rest + value;
    const cut = text.endsWith("\r") ? text.length - 1 : text.length; // a "\r\n" may be split between chunks
    const lines = text.slice(0, cut).split(/\r\n|\r|\n/);
    rest = lines.pop() + text.slice(cut);
    for (const line of lines) {
      if (line === "") {
        if (data.length) yield data.join("\n");
        data = [];
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      }
    }
  }
}

/**
 * @param {string} [base] the server's address ("": this page's)
 * @param {string | null} [token]
 * @returns {DataSource}
 */
export function httpSource(base = "", token = null) {
  /** @param {Record<string, string>} [headers] */
  const auth = (headers = {}) => (token ? { ...headers, Authorization: `token ${token}` } : headers);
  /**
   * @param {string} href
   * @param {RequestInit & {headers?: Record<string, string>}} [init]
   */
  const call = async (href, init = {}) => {
    let res;
    try {
      res = await fetch(href, { ...init, headers: auth(init.headers) });
    } catch (err) {
      throw new DataError(0, `cannot reach the uopviz server (${err.message})`);
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new DataError(res.status, body?.detail ?? `${res.status} ${res.statusText}`);
    return body;
  };
  /** @type {(route: RouteSpec) => (...args: unknown[]) => Promise<any>} */
  const method = (route) => (...args) => {
    let path = route.path;
    /** @type {[string, string][]} */
    const params = [];
    /** @type {Record<string, unknown>} */
    const body = {};
    route.args.forEach(([name, where], i) => {
      if (where === "path") path = path.replace(`{${name}}`, encodeURIComponent(String(args[i])));
      else if (where === "query" && args[i] != null) params.push([name, String(args[i])]);
      else if (where === "body" && args[i] !== undefined) body[name] = args[i];
    });
    const href = `${base}${path}${params.length ? `?${new URLSearchParams(params)}` : ""}`;
    if (route.http === "GET") return call(href);
    return call(href, { method: route.http, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  };
  const source = /** @type {DataSource} */ (/** @type {unknown} */ (Object.fromEntries(ROUTES.map((r) => [r.method, method(r)]))));
  return {
    ...source,
    // EventSource cannot send a header, so the stream is read with fetch; like EventSource, it reconnects
    // after a drop (the server replays the job from its first event, and seq skips what was seen).
    beamEvents: (job, onEvent) => {
      const abort = new AbortController();
      let seen = 0;
      let over = false;
      const close = () => {
        over = true;
        abort.abort();
      };
      /** @param {string} detail */
      const fail = (detail) => {
        if (over) return;
        close();
        onEvent({ event: "error", kind: "failed", detail });
      };
      const follow = async () => {
        for (let tries = 0; !over; tries++) {
          try {
            const res = await fetch(`${base}/api/beam/${encodeURIComponent(job)}/events`, { headers: auth({ Accept: "text/event-stream" }), signal: abort.signal });
            if (!res.ok) {
              const body = await res.json().catch(() => null);
              return fail(describe(body?.detail ?? `${res.status} ${res.statusText}`));
            }
            for await (const data of sseData(/** @type {ReadableStream<Uint8Array<ArrayBuffer>>} */ (res.body))) { // an ok answer has a body
              /** @type {BeamEvent & {seq: number}} */
              const event = JSON.parse(data);
              if (over) return;
              if (event.seq <= seen) continue; // a reconnected stream replays the job from its start
              seen = event.seq;
              tries = 0;
              onEvent(event);
              if (event.event === "done" || event.event === "error") return close();
            }
          } catch {
            if (over) return;
          }
          if (tries >= STREAM_RETRIES) return fail("lost the connection to the search's progress stream");
          await new Promise((resolve) => setTimeout(resolve, STREAM_RETRY_MS));
        }
      };
      follow();
      return close;
    },
  };
}
