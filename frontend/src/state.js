// The view lives in the URL hash: #/t/gemm/c/1/p/3/s/5/o/SPLIT:0:4:UPCAST:0/v/kernel
//   t trace id, c context index, p pass index, s step, o the kernel's opts, v the side-panel tab,
//   b the BEAM search shown in the BEAM tab (its id in the tuning database).
// Without o the kernel is shown as compiled (with the opts the compiler chose); with it, lowered again with
// exactly the opts listed ("-": none). An opt is written OP:axis:arg..., several joined by ",":
//   SPLIT:0:4:UPCAST:0 (factor, target AxisType, top 0/1), PADTO:1:32, SWAP:0:2, NOLOCALS.

export const TABS = ["rewrite", "kernel", "beam"];

export function emptyState() {
  return { tid: null, ci: null, pi: 0, k: 0, opts: null, tab: "rewrite", search: null };
}

export function formatOpts(opts) {
  return opts.length ? opts.map(formatOpt).join(",") : "-";
}

function formatOpt(o) {
  if (o.op === "NOLOCALS") return "NOLOCALS";
  if (o.op === "SPLIT") return `SPLIT:${o.axis}:${o.arg[0]}:${o.arg[1]}:${o.arg[2] ? 1 : 0}`;
  return `${o.op}:${o.axis}:${o.arg}`;
}

function parseOpt(text) {
  const [op, axis, ...arg] = text.split(":");
  const int = (s) => {
    if (!/^\d+$/.test(s ?? "")) throw new Error(`bad opt ${text}`);
    return Number(s);
  };
  if (op === "NOLOCALS") return { op, axis: null, arg: null };
  if (op === "SPLIT") return { op, axis: int(axis), arg: [int(arg[0]), arg[1], arg[2] === "1"] };
  if (op === "PADTO" || op === "SWAP") return { op, axis: int(axis), arg: int(arg[0]) };
  throw new Error(`bad opt ${text}`);
}

export function formatHash(s) {
  if (s.tid == null) return "";
  let hash = `#/t/${encodeURIComponent(s.tid)}/c/${s.ci}/p/${s.pi}/s/${s.k}`;
  if (s.opts) hash += `/o/${formatOpts(s.opts)}`;
  if (s.tab !== "rewrite") hash += `/v/${s.tab}`;
  if (s.search != null) hash += `/b/${s.search}`;
  return hash;
}

export function parseHash(hash) {
  const s = emptyState();
  const parts = hash.replace(/^#\/?/, "").split("/");
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const [key, value] = [parts[i], decodeURIComponent(parts[i + 1])];
    if (key === "t") s.tid = value;
    else if (key in NUMBERS && /^\d+$/.test(value)) s[NUMBERS[key]] = Number(value);
    else if (key === "v" && TABS.includes(value)) s.tab = value;
    else if (key === "o") {
      try {
        s.opts = value === "-" ? [] : value.split(",").map(parseOpt);
      } catch {
        s.opts = null;
      }
    }
  }
  return s;
}

const NUMBERS = { c: "ci", p: "pi", s: "k", b: "search" };
