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
// httpSource() implements it over HTTP; the Jupyter widget implements the same methods over its comm.

export class DataError extends Error {
  constructor(status, detail) {
    super(describe(detail));
    this.name = "DataError";
    this.status = status;
    this.detail = detail;
  }
}

// FastAPI's detail is a string, or for request validation a list of {loc, msg}.
function describe(detail) {
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) return detail.map((d) => (d.loc ? `${d.loc.join(".")}: ${d.msg}` : d.msg ?? JSON.stringify(d))).join("; ");
  return JSON.stringify(detail);
}

export function httpSource(base = "") {
  const url = (...parts) => `${base}/api/${parts.map((p) => encodeURIComponent(p)).join("/")}`;
  const call = async (href, init) => {
    let res;
    try {
      res = await fetch(href, init);
    } catch (err) {
      throw new DataError(0, `cannot reach the uopviz server (${err.message})`);
    }
    const body = await res.json().catch(() => null);
    if (!res.ok) throw new DataError(res.status, body?.detail ?? `${res.status} ${res.statusText}`);
    return body;
  };
  const ctx = (tid, ci) => ["traces", tid, "contexts", ci];
  const post = (href, body) => call(href, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  const query = (href, params) => {
    const given = Object.entries(params).filter(([, v]) => v != null);
    return given.length ? `${href}?${new URLSearchParams(given)}` : href;
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
    beamEvents: (job, onEvent) => {
      const stream = new EventSource(url("beam", job, "events"));
      let seen = 0;
      let over = false;
      const close = () => {
        over = true;
        stream.close();
      };
      stream.onmessage = (message) => {
        const event = JSON.parse(message.data);
        if (over || event.seq <= seen) return; // a reconnected stream replays the job from its start
        seen = event.seq;
        onEvent(event);
        if (event.event === "done" || event.event === "error") close();
      };
      // While the browser reconnects by itself the stream is CONNECTING; CLOSED means it gave up.
      stream.onerror = () => {
        if (over || stream.readyState !== EventSource.CLOSED) return;
        close();
        onEvent({ event: "error", kind: "failed", detail: "lost the connection to the search's progress stream" });
      };
      return close;
    },
  };
}
