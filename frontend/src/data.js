// The UI reads everything through a data source: an object with these six async methods. Each resolves
// to the JSON of the matching `uopviz serve` route and rejects with a DataError (status, detail):
//
//   meta()                     GET  /api/meta
//   traces()                   GET  /api/traces
//   trace(tid)                 GET  /api/traces/{tid}
//   step(tid, ci, pi, k)       GET  /api/traces/{tid}/contexts/{ci}/passes/{pi}/steps/{k}
//   kernel(tid, ci)            GET  /api/traces/{tid}/contexts/{ci}/kernel
//   applyOpts(tid, ci, opts)   POST /api/traces/{tid}/contexts/{ci}/opts  {"opts": opts}
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
  return {
    meta: () => call(url("meta")),
    traces: () => call(url("traces")),
    trace: (tid) => call(url("traces", tid)),
    step: (tid, ci, pi, k) => call(url(...ctx(tid, ci), "passes", pi, "steps", k)),
    kernel: (tid, ci) => call(url(...ctx(tid, ci), "kernel")),
    applyOpts: (tid, ci, opts) =>
      call(url(...ctx(tid, ci), "opts"), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ opts }),
      }),
  };
}
