// The view state: {tid, ci, pi, k, opts, tab, search}. The web page keeps it in the URL hash:
//   #/t/gemm/c/1/p/3/s/5/o/SPLIT:0:4:UPCAST:0/v/kernel
//   t trace id, c context index, p pass index, s step, o the kernel's opts, v the side panel shown (a panel's id),
//   b the BEAM search shown in the BEAM tab (its id in the tuning database), n the node selected (its id), q the
//   graph's search text, e the Calls of a schedule drawn opened to their kernels (their ids, comma-separated).
// Without o the kernel is shown as compiled (with the opts the compiler chose); with it, lowered again with
// exactly the opts listed (written as opts.js formatOpts does; "-": none).
import { formatOpts, parseOpts } from "./opts.js";
/** @import { Meta } from "../types/api" */
/** @import { ViewState } from "../types/ui" */

/** @returns {ViewState} */
export function emptyState() {
  return { tid: null, ci: null, pi: 0, k: 0, opts: null, tab: "rewrite", search: null, node: null, query: null, calls: [] };
}

/** @param {ViewState} s */
export function formatHash(s) {
  if (s.tid == null) return "";
  let hash = `#/t/${encodeURIComponent(s.tid)}/c/${s.ci}/p/${s.pi}/s/${s.k}`;
  if (s.opts) hash += `/o/${formatOpts(s.opts)}`;
  if (s.tab !== "rewrite") hash += `/v/${s.tab}`;
  if (s.search != null) hash += `/b/${s.search}`;
  if (s.node != null) hash += `/n/${s.node}`;
  if (s.query) hash += `/q/${encodeURIComponent(s.query)}`;
  if (s.calls.length) hash += `/e/${s.calls.join(",")}`;
  return hash;
}

// meta: the data source's (its opts read the o part); tabs: the ids of the panels there are.
/**
 * @param {string} hash
 * @param {Meta} meta
 * @param {string[]} tabs
 * @returns {ViewState}
 */
export function parseHash(hash, meta, tabs) {
  const s = emptyState();
  const parts = hash.replace(/^#\/?/, "").split("/");
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const key = parts[i];
    let value;
    try {
      value = decodeURIComponent(parts[i + 1]);
    } catch {
      continue; // a malformed %-escape (a hand-edited link): the part is left out, not the whole view
    }
    if (key === "t") s.tid = value;
    else if (key === "n" && NODE_ID.test(value)) s.node = value;
    else if (key === "q" && value) s.query = value;
    else if (key === "e") s.calls = [...new Set(value.split(",").filter((id) => NODE_ID.test(id)))];
    else if (Object.hasOwn(NUMBERS, key) && /^\d+$/.test(value)) s[NUMBERS[key]] = Number(value);
    else if (key === "v" && tabs.includes(value)) s.tab = value;
    else if (key === "o") {
      try {
        s.opts = parseOpts(meta, value);
      } catch {
        s.opts = null;
      }
    }
  }
  return s;
}

const NODE_ID = /^[0-9a-f]{16}$/;

/** @type {Record<string, "ci" | "pi" | "k" | "search">} */
const NUMBERS = { c: "ci", p: "pi", s: "k", b: "search" };
