// The UI reads everything through a data source: an object with these async methods. Each resolves to the
// JSON of the matching `uopviz serve` route and rejects with a DataError (status, detail):
//
//   meta()                     GET  /api/meta
//   traces()                   GET  /api/traces
//   trace(tid)                 GET  /api/traces/{tid}
//   step(tid, ci, pi, k)       GET  /api/traces/{tid}/contexts/{ci}/passes/{pi}/steps/{k}
//   python(tid, ci, pi, k, node)
//                              GET  /api/traces/{tid}/contexts/{ci}/passes/{pi}/steps/{k}/python[?node=]
//   kernel(tid, ci)            GET  /api/traces/{tid}/contexts/{ci}/kernel
//   timeKernel(tid, ci)        POST /api/traces/{tid}/contexts/{ci}/time  {}
//   machineCode(tid, ci)       GET  /api/traces/{tid}/contexts/{ci}/machine-code
//   applyOpts(tid, ci, opts)   POST /api/traces/{tid}/contexts/{ci}/opts  {"opts": opts}
//   searches(kernelHash, before)
//                              GET  /api/tuning/searches[?kernel_hash=&before=]  a page, newest first:
//                              {searches, next_before} (kernelHash null: every kernel's; before null: the first page)
//   search(sid)                GET  /api/tuning/searches/{sid}
//   results(kernelHash)        GET  /api/tuning/results[?kernel_hash=]
//   startBeam(tid, ci, width, maxRounds)
//                              POST /api/traces/{tid}/contexts/{ci}/beam  {"width", "max_rounds"}
//
// and one subscription: beamEvents(job, onEvent) calls onEvent with each progress event of a BEAM job (the
// JSON of GET /api/beam/{job}/events, from its first event on, each once), ending with a "done" or an
// "error" event, and returns a function that stops it. A lost connection ends it with an error event.
//
// httpSource(base, token) implements it over HTTP, sending the server's token (pageToken()) as a header on every
// request, the event stream included; the Jupyter widget implements the same methods over its comm.
/** @import { BeamEvent, DataSource } from "../types/api" */

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
  /** @param {...(string | number)} parts */
  const url = (...parts) => `${base}/api/${parts.map((p) => encodeURIComponent(p)).join("/")}`;
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
  /** @type {(tid: string, ci: number) => (string | number)[]} */
  const ctx = (tid, ci) => ["traces", tid, "contexts", ci];
  /** @type {(href: string, body: unknown) => Promise<any>} */
  const post = (href, body) => call(href, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  /** @type {(href: string, params: Record<string, string | number | null>) => string} */
  const query = (href, params) => {
    const given = Object.entries(params).filter(([, v]) => v != null);
    return given.length ? `${href}?${new URLSearchParams(/** @type {[string, string][]} */ (given))}` : href;
  };
  return {
    meta: () => call(url("meta")),
    traces: () => call(url("traces")),
    trace: (tid) => call(url("traces", tid)),
    step: (tid, ci, pi, k) => call(url(...ctx(tid, ci), "passes", pi, "steps", k)),
    python: (tid, ci, pi, k, node = null) => call(query(url(...ctx(tid, ci), "passes", pi, "steps", k, "python"), { node })),
    kernel: (tid, ci) => call(url(...ctx(tid, ci), "kernel")),
    timeKernel: (tid, ci) => post(url(...ctx(tid, ci), "time"), {}),
    machineCode: (tid, ci) => call(url(...ctx(tid, ci), "machine-code")),
    applyOpts: (tid, ci, opts) => post(url(...ctx(tid, ci), "opts"), { opts }),
    searches: (kernelHash = null, before = null) => call(query(url("tuning", "searches"), { kernel_hash: kernelHash, before })),
    search: (sid) => call(url("tuning", "searches", sid)),
    results: (kernelHash = null) => call(query(url("tuning", "results"), { kernel_hash: kernelHash })),
    startBeam: (tid, ci, width, maxRounds) => post(url(...ctx(tid, ci), "beam"), { width, max_rounds: maxRounds }),
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
            const res = await fetch(url("beam", job, "events"), { headers: auth({ Accept: "text/event-stream" }), signal: abort.signal });
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
