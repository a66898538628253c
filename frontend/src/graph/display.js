// Turns a step's node table into the graph that is drawn: the nodes reachable from the root (and the nodes the step
// removed), edges from each source to its user numbered by operand, and labels sized for a monospace font. Four
// views of the same graph make big kernels readable, each a choice in `options`:
//  - index: the arithmetic of an Index node's index (and gate), a tree of Add/Mul/Idiv/Mod over Ranges and
//    constants, becomes one line of text on the Index node ("[r0*1024 + r2]"); such nodes that nothing else uses
//    are not drawn, and a Range's constant bound is in its title rather than an edge.
//  - lanes: nodes that differ only in their constants (the copies an UPCAST makes of the kernel's body, the lanes
//    of a devectorized value) are drawn once, with their count ("Store ×128").
//  - calls: a schedule's Call drawn as one box over its inputs and outputs (its buffers and the values it waits on),
//    its kernel's body (its first source) not drawn but counted on it, unless another node uses that body or the
//    Call is one of `expanded` (the Calls opened one at a time: a schedule of hundreds of kernels stays readable);
//    a Call whose body is a kernel of `kernels` (a kernel context's first graph: kernelsByBody) is titled with its
//    kernel's name, so a schedule's boxes say which kernel each is.
//  - hidden: op groups not drawn; their users are wired to their sources (dashed edges).
//  - always: shared hub nodes (ranges, params, buffers, constants, variables) are drawn once per use, without their
//    own sources, so a Range used by forty index expressions does not pull forty edges across the picture. A node
//    with more than FAN_IN_MAX sources (a Linear program lists every instruction) keeps its edges in the layout but
//    they are not drawn: the node says how many it has, and the inspector lists them.

import { textOn } from "../dom.js";
/** @import { GraphNode, StepView } from "../../types/api" */
/** @import { DisplayEdge, DisplayGraph, DisplayNode } from "../../types/ui" */
/** @typedef {Map<string, GraphNode>} Table the step's nodes by id */
/** @typedef {{index: boolean, lanes: boolean, calls: boolean, expanded: Set<string>, kernels: Map<string, import("../../types/api").ContextInfo>, hidden: Set<string>, commutative: Set<string>}} DisplayOptions */
/** @typedef {{text: string, buffer: string | null}} Address an Index's text, and its buffer to draw (not a Param) */
/** @typedef {{text: Map<string, string>, absorbed: Set<string>, address: Map<string, Address>, math: Map<string, boolean>}} Folding */
/** @typedef {{key: string, members: string[], srcs: Map<string, [string, Set<number>]>}} Group nodes drawn as one */
/** @typedef {[string, Set<number> | null]} Use a user's key and the operands it uses (null: bridged over hidden nodes) */

const HUB_OPS = new Set(["Range", "Param", "Buffer", "Const", "DefineVar", "Special"]);
const FAN_IN_MAX = 64;
const CHAR_W = 6.7; // width of one character of the node font (11px monospace)
const PAD_X = 8;
const LINE_H = 13;
const MAX_ARG = 30; // characters of arg text in a node's title (the inspector shows it all)
const MAX_EXPR = 60; // characters of an index expression on its node (its tooltip and the inspector show it all)
const OTHER = "other"; // the filter name of ops in no group
const UNORDERED = new Set(["Sink", "Group", "Linear"]); // ops whose edges need no operand numbers
const KEEP_CHANGED = 40; // a step that adds at most this many nodes keeps them out of index text

// What an index expression is made of: the values it reads, and arithmetic on them (never a float).
const INDEX_LEAVES = new Set(["Const", "Range", "Special", "DefineVar"]);
const INDEX_OPS = new Set(["Add", "Sub", "Mul", "Idiv", "Mod", "Max", "Neg", "Shl", "Shr", "And", "Or", "Xor", "Not", "Where", "Cast", "Stack", "CmpLt", "CmpNe", "CmpEq", "CmpGt", "CmpGe", "CmpLe"]);
/** @type {Record<string, [string, number]>} */
const BINARY = {
  Or: [" | ", 1],
  Xor: [" ^ ", 1],
  And: [" & ", 2],
  CmpLt: [" < ", 3],
  CmpNe: [" != ", 3],
  CmpEq: [" == ", 3],
  CmpGt: [" > ", 3],
  CmpGe: [" >= ", 3],
  CmpLe: [" <= ", 3],
  Shl: [" << ", 4],
  Shr: [" >> ", 4],
  Add: [" + ", 5],
  Sub: [" - ", 5],
  Mul: ["*", 6],
  Idiv: ["//", 6],
  Mod: ["%", 6],
};
const LEAF = 9;

// The views that make a big graph readable, as displayGraph takes them.
/** @type {DisplayOptions} */
export const DEFAULT_OPTIONS = { index: false, lanes: false, calls: false, expanded: new Set(), kernels: new Map(), hidden: new Set(), commutative: new Set() };

// The kernel contexts of a schedule's Calls, by their body's node id: a kernel context's first graph is the body its
// Call holds (its kernel_hash; a shard's kernel, keyed otherwise, is left out). The first context of a body is it.
/**
 * @param {import("../../types/api").ContextInfo[]} contexts
 * @returns {Map<string, import("../../types/api").ContextInfo>}
 */
export function kernelsByBody(contexts) {
  const out = new Map();
  for (const c of contexts) if (c.kind === "kernel" && c.kernel_hash && !out.has(c.kernel_hash)) out.set(c.kernel_hash, c);
  return out;
}

// step: the /steps/{k} response; removedNodes: the nodes the step removed (by id), drawn beside the graph when given
// (the step's own table may hold them too); options: as DEFAULT_OPTIONS.
/**
 * @param {StepView} step
 * @param {Map<string, GraphNode> | null} [removedNodes]
 * @param {DisplayOptions} [options]
 * @returns {DisplayGraph}
 */
export function displayGraph(step, removedNodes = null, options = DEFAULT_OPTIONS) {
  const table = new Map(removedNodes ?? []);
  for (const n of step.nodes) table.set(n.id, n);
  const removed = removedNodes ? step.removed.filter((id) => table.has(id)) : [];
  const roots = [step.root, ...removed];
  const isRoot = new Set(roots);
  const order = usersFirst(roots, table);
  const status = statusOf(step, removed);

  // 1. Index arithmetic folded into text: an Index's index (and gate), with its buffer when that is a Param, and the
  // Index itself into the Load or Store that reads or writes through it. A node is drawn when a drawn node uses it;
  // a use by a node of more than FAN_IN_MAX sources (a Linear program lists every instruction) is weak: it keeps a
  // node that nothing else uses, but not one folded into text.
  // What a small step changed stays drawn as a graph, not text, so the change is seen where it is.
  /** @type {Set<string | null>} */
  const changed = step.added.length <= KEEP_CHANGED ? new Set([...step.added, step.replacement]) : new Set();
  const folding = options.index ? indexFolding(order, table, changed) : null;
  /** @type {Map<string, string>} */
  const exprs = folding?.text ?? new Map(); // drawn node id -> its index text
  /** @type {Map<string, string>} */
  const titles = new Map(); // drawn node id -> its title, where not its op and arg (a Call named by its kernel)
  const users = new Map(order.map((id) => [id, 0]));
  /** @type {Set<string>} */
  const weak = new Set();
  /** @type {Set<string>} */
  const folded = new Set();
  /** @type {Map<string, [string, number][]>} */
  const sources = new Map(); // id -> [[source id, operand]]
  for (const id of order) {
    const node = /** @type {GraphNode} */ (table.get(id));
    if (!users.get(id) && !isRoot.has(id) && !(weak.has(id) && !folded.has(id))) {
      for (const s of node.src) folded.add(s); // what only folded nodes read is folded too
      continue;
    }
    /** @type {[string, number][]} */
    const shown = [];
    node.src.forEach((s, i) => {
      if (!table.has(s)) return;
      if (options.calls && i === 0 && node.op === "Call" && node.src.length > 1 && !options.expanded.has(id)) {
        exprs.set(id, `kernel of ${reachable(s, table)} nodes`); // its body: drawn only for another user
        const kernel = options.kernels.get(s);
        if (kernel) titles.set(id, `Call ${kernel.label}`);
        return;
      }
      const through = folding?.absorbed.has(s) && i === 0 ? folding.address.get(s) : null; // a Load/Store's Index
      if (through) {
        folded.add(s);
        if (through.buffer) shown.push([through.buffer, i]);
        exprs.set(id, through.text);
      } else if (folding && foldedEdge(node, s, i, folding, table)) folded.add(s);
      else shown.push([s, i]);
    });
    sources.set(id, shown);
    for (const [s] of shown) {
      if (node.src.length > FAN_IN_MAX) weak.add(s);
      else users.set(s, /** @type {number} */ (users.get(s)) + 1);
    }
  }
  for (const [id, srcs] of sources) sources.set(id, srcs.filter(([s]) => sources.has(s))); // weak uses of folded text
  const drawnIds = order.filter((id) => sources.has(id));

  // 2. Lane copies and vector lanes: nodes alike but for constants share one drawn node. Groups are visited users
  // first by height (the longest path down to a leaf): nodes alike have equal heights, and every edge goes up.
  /** @type {Map<string, number>} */
  const height = new Map();
  for (let i = drawnIds.length - 1; i >= 0; i--) height.set(drawnIds[i], 1 + Math.max(-1, .../** @type {[string, number][]} */ (sources.get(drawnIds[i])).map(([s]) => /** @type {number} */ (height.get(s)))));
  /** @param {string} id */
  const marked = (id) => (id === step.match ? "match" : id === step.replacement ? "replacement" : status(id));
  const groupOf = options.lanes ? laneGroups(drawnIds, table, sources, marked, exprs) : new Map(drawnIds.map((id) => [id, id]));
  /** @type {Map<string, Group>} */
  const groups = new Map(); // group key -> {members, srcs: Map "src group" -> [src group, operands]}
  for (const id of [...drawnIds].sort((a, b) => /** @type {number} */ (height.get(b)) - /** @type {number} */ (height.get(a)))) {
    const key = /** @type {string} */ (groupOf.get(id));
    if (!groups.has(key)) groups.set(key, { key, members: [], srcs: new Map() });
    const g = /** @type {Group} */ (groups.get(key));
    g.members.push(id);
    for (const [s, i] of /** @type {[string, number][]} */ (sources.get(id))) {
      const sk = /** @type {string} */ (groupOf.get(s));
      if (!g.srcs.has(sk)) g.srcs.set(sk, [sk, new Set()]);
      /** @type {[string, Set<number>]} */ (g.srcs.get(sk))[1].add(i);
    }
  }

  // 3. Hidden op groups: each user of a hidden node is wired to the hidden node's visible sources.
  const rootKeys = new Set(roots.map((id) => groupOf.get(id)));
  /** @type {(key: string) => GraphNode} */
  const first = (key) => /** @type {GraphNode} */ (table.get(/** @type {Group} */ (groups.get(key)).members[0]));
  /** @param {string} key */
  const hiddenKey = (key) => !rootKeys.has(key) && options.hidden.has(first(key).group ?? OTHER);
  /** @type {(key: string) => Use[]} */
  const visibleSources = memo((key, self) => [.../** @type {Group} */ (groups.get(key)).srcs.values()].flatMap(([s, ops]) => (hiddenKey(s) ? self(s).map(([v]) => /** @type {Use} */ ([v, null])) : [/** @type {Use} */ ([s, ops])])));

  // 4. Drawn nodes, users first; hubs once per use, without their sources (which are drawn only for other users).
  /** @type {Map<string, Use[]>} */
  const uses = new Map(); // group key -> [[user key, operands (null: bridged)]]
  /** @type {DisplayNode[]} */
  const nodes = [];
  /** @type {DisplayEdge[]} */
  const edges = [];
  /** @param {string} key */
  const unordered = (key) => UNORDERED.has(first(key).op) || options.commutative.has(first(key).op) || first(key).src.length < 2;
  /** @type {(key: string, ops: Set<number> | null) => string | null} */
  const operand = (key, ops) => (ops == null || unordered(key) ? null : ops.size === 1 ? String([...ops][0]) : `${Math.min(...ops)}‥${Math.max(...ops)}`);
  for (const key of groups.keys()) {
    const used = uses.get(key) ?? [];
    if (hiddenKey(key) || (!used.length && !rootKeys.has(key))) continue;
    const srcs = visibleSources(key);
    const st = status(/** @type {Group} */ (groups.get(key)).members[0]);
    /** @param {string} user */
    const fanIn = (user) => first(user).src.length > FAN_IN_MAX;
    /** @type {(v: string, use: Use) => DisplayEdge} */
    const edge = (v, [user, ops]) => ({ v, w: user, name: ops == null ? `b${v}` : [...ops].join(","), operand: operand(user, ops), bridged: ops == null, status: status(/** @type {Group} */ (groups.get(user)).members[0]) ?? st, hidden: fanIn(user) });
    const shown = used.filter(([user]) => !fanIn(user)); // the uses whose edges are drawn
    if (HUB_OPS.has(first(key).op) && used.length > 1) {
      (shown.length ? shown : used.slice(0, 1)).forEach(([user, ops], n) => {
        const copy = `${key}~${n}`;
        nodes.push(node(copy, /** @type {Group} */ (groups.get(key)).members, table, status, exprs, true, titles));
        edges.push(edge(copy, [user, ops]));
      });
      continue;
    }
    nodes.push(node(key, /** @type {Group} */ (groups.get(key)).members, table, status, exprs, false, titles));
    // an edge into a node of many sources is not drawn; it is laid out only where it is the node's one use (so a
    // Linear program sits below its last instructions without hundreds of long edges to route)
    for (const use of shown.length ? shown : used) edges.push(edge(key, use));
    for (const [s, ops] of srcs) {
      if (!uses.has(s)) uses.set(s, []);
      const mine = /** @type {Use[]} */ (uses.get(s)).find(([u]) => u === key); // a bridged and a direct edge from one source merge
      if (mine && ops != null) mine[1] = new Set([...(mine[1] ?? []), ...ops]);
      else if (!mine) /** @type {Use[]} */ (uses.get(s)).push([key, ops]);
    }
  }
  // what the drawn graph depends on (the layout cache's key): with the views on, also what the step marks
  const marks = options.index || options.lanes ? `|${step.match}|${step.replacement}|${[...changed].join(",")}` : "";
  const key = `${step.root}|${removed.join(",")}|${options.index}|${options.lanes}|${options.calls}${options.calls && options.expanded.size ? `:${[...options.expanded].sort().join(",")}` : ""}|${[...options.hidden].sort().join(",")}${marks}${titles.size ? `|${[...titles.values()].join(",")}` : ""}`;
  return { key, root: step.root, nodes, edges, match: step.match, replacement: step.replacement, total: order.length };
}

// A node's mark for this step: added, removed (drawn beside), rebuilt (an ancestor hash-consing rebuilt), or null.
/**
 * @param {StepView} step
 * @param {string[]} removed
 * @returns {(id: string) => string | null}
 */
function statusOf(step, removed) {
  /** @type {Map<string, string>} */
  const marks = new Map(/** @type {[string, string][]} */ ([...step.added.map((id) => [id, "added"]), ...removed.map((id) => [id, "removed"]), ...(step.rebuilt ?? []).map(([, id]) => [id, "rebuilt"])]));
  return (id) => marks.get(id) ?? null;
}

// Every node reachable from `roots` through sources, each after all of its users.
/**
 * @param {string[]} roots
 * @param {Table} table
 */
function usersFirst(roots, table) {
  const seen = new Set();
  /** @type {string[]} */
  const post = [];
  for (const root of roots) {
    if (seen.has(root)) continue;
    /** @type {[string, number][]} */
    const stack = [[root, 0]];
    seen.add(root);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const src = /** @type {GraphNode} */ (table.get(top[0])).src;
      if (top[1] < src.length) {
        const s = src[top[1]++];
        if (table.has(s) && !seen.has(s)) {
          seen.add(s);
          stack.push([s, 0]);
        }
      } else {
        post.push(top[0]);
        stack.pop();
      }
    }
  }
  return post.reverse();
}

// fn(key, self) memoized, where self is the memoized function (for recursion over a DAG).
/**
 * @template K, V
 * @param {(key: K, self: (key: K) => V) => V} fn
 * @returns {(key: K) => V}
 */
function memo(fn) {
  /** @type {Map<K, V>} */
  const known = new Map();
  /** @param {K} key */
  const self = (key) => {
    if (!known.has(key)) known.set(key, fn(key, self));
    return /** @type {V} */ (known.get(key));
  };
  return self;
}

/** @param {string | null | undefined} dtype */
const isFloat = (dtype) => /^(float|half|bfloat|double)/.test(dtype ?? "");

/**
 * @param {string} id
 * @param {Table} table
 * @param {Map<string, boolean>} math
 * @param {Set<string | null>} changed
 * @returns {boolean}
 */
function isIndexMath(id, table, math, changed) {
  if (!math.has(id)) {
    const n = /** @type {GraphNode} */ (table.get(id));
    let yes = !changed.has(id) && !isFloat(n.dtype) && (INDEX_LEAVES.has(n.op) || INDEX_OPS.has(n.op));
    if (yes && INDEX_OPS.has(n.op)) {
      math.set(id, false); // a cycle cannot happen in a DAG; this only bounds the recursion
      yes = n.src.every((s) => table.has(s) && isIndexMath(s, table, math, changed));
    }
    math.set(id, yes);
  }
  return /** @type {boolean} */ (math.get(id));
}

// Whether the edge from source s (operand i) into `node` is folded into the node's text: index arithmetic of an
// Index (and its Param, which the text names), and a Range's constant bound (its title shows it).
/**
 * @param {GraphNode} node
 * @param {string} s
 * @param {number} i
 * @param {Folding} folding
 * @param {Table} table
 */
function foldedEdge(node, s, i, folding, table) {
  if (node.op === "Range") return /** @type {GraphNode} */ (table.get(s)).op === "Const";
  const address = folding.address.get(node.id);
  return Boolean(address) && (i > 0 || /** @type {Address} */ (address).buffer === null);
}

// The index text of every Index node whose operands after the first are index arithmetic ("p1[r0*1024 + r2]": the
// buffer named when it is a Param, several indices comma-separated, a gate after "if"), which of them only Loads and
// Stores read or write through (absorbed: their text goes on the Load or Store), and the Index's buffer to draw
// when it is not a Param (address: id -> {text, buffer}). Nodes in `changed` are not index arithmetic.
/**
 * @param {string[]} order
 * @param {Table} table
 * @param {Set<string | null>} changed
 * @returns {Folding}
 */
function indexFolding(order, table, changed) {
  /** @type {Map<string, boolean>} */
  const math = new Map();
  /** @type {Map<string, string>} */
  const text = new Map();
  /** @type {Map<string, Address>} */
  const address = new Map();
  /** @type {(id: string) => [string, number]} */
  const expr = memo((id, self) => expression(/** @type {GraphNode} */ (table.get(id)), self, table));
  /** @type {Map<string, [string, number][]>} */
  const userOps = new Map(order.map((id) => [id, []]));
  for (const id of order) for (const [i, s] of /** @type {GraphNode} */ (table.get(id)).src.entries()) userOps.get(s)?.push([/** @type {GraphNode} */ (table.get(id)).op, i]);
  for (const id of order) {
    const n = /** @type {GraphNode} */ (table.get(id));
    if (n.op !== "Index" || n.src.length < 2 || !n.src.slice(1).every((s) => table.has(s) && isIndexMath(s, table, math, changed))) continue;
    const buffer = table.get(n.src[0]);
    const name = buffer?.op === "Param" ? `p${buffer.arg.replace(/^slot /, "").split(" ")[0]}` : "";
    const parts = n.src.slice(1).map((s) => expr(s)[0]);
    const gated = parts.length > 1 && /** @type {GraphNode} */ (table.get(n.src[n.src.length - 1])).dtype === "bool";
    const t = `${name}[${(gated ? parts.slice(0, -1) : parts).join(", ")}]${gated ? ` if ${parts[parts.length - 1]}` : ""}`;
    text.set(id, t);
    address.set(id, { text: t, buffer: name ? null : n.src[0] });
  }
  // an Index that nothing but a Load or a Store reads, as its address, is drawn as their text
  const absorbed = new Set(
    [...text.keys()].filter((id) => {
      const uses = /** @type {[string, number][]} */ (userOps.get(id)).filter(([op]) => op !== "Linear");
      return uses.length > 0 && uses.every(([op, i]) => (op === "Load" || op === "Store") && i === 0);
    }),
  );
  return { text, absorbed, address, math };
}

// [text, precedence] of an index-arithmetic node, its operands already written by `text`.
/**
 * @param {GraphNode} n
 * @param {(id: string) => [string, number]} text
 * @param {Table} table
 * @returns {[string, number]}
 */
function expression(n, text, table) {
  /** @type {(id: string, prec: number) => string} */
  const wrap = (id, prec) => {
    const [t, p] = text(id);
    return p < prec ? `(${t})` : t;
  };
  const [a, b, c] = n.src;
  switch (n.op) {
    case "Const":
    case "Special":
      return [n.arg, LEAF];
    case "Range":
    case "DefineVar":
      return [n.arg.split(" ")[0], LEAF];
    case "Cast":
      return text(a);
    case "Neg":
      return [`-${wrap(a, 7)}`, 7];
    case "Not":
      return [`!${wrap(a, 7)}`, 7];
    case "Max":
      return [`max(${text(a)[0]}, ${text(b)[0]})`, LEAF];
    case "Where":
      return [`${wrap(a, 1)} ? ${wrap(b, 1)} : ${wrap(c, 1)}`, 0];
    case "Stack":
      return [stackText(n.src.map((s) => table.get(s))), LEAF];
    default: {
      const [sym, prec] = BINARY[n.op];
      return [`${wrap(a, prec)}${sym}${wrap(b, prec + 1)}`, prec];
    }
  }
}

// A vector of index constants: "<0‥15>" when they count up by one, else "<0, 4, 8, …>".
/** @param {(GraphNode | undefined)[]} items */
function stackText(items) {
  const values = items.map((n) => (n?.op === "Const" ? Number(n.arg) : NaN));
  if (values.length > 2 && values.every((v, i) => v === values[0] + i)) return `<${values[0]}‥${values[values.length - 1]}>`;
  const shown = items.slice(0, 4).map((n) => (n?.op === "Const" ? n.arg : n?.op ?? "?"));
  return `<${shown.join(", ")}${items.length > 4 ? ", …" : ""}>`;
}

// Nodes alike but for their constants (and their index expressions) get one key: the same op, dtype, shape, arg
// (a Const's value aside), mark (`marked`: the step's match, replacement, added...), and sources alike in the same
// places. Keys come sources first, so copies of a
// whole subtree collapse together, and a group's nodes all sit at one depth (so the drawn graph has no cycle).
/**
 * @param {string[]} ids
 * @param {Table} table
 * @param {Map<string, [string, number][]>} sources
 * @param {(id: string) => string | null} marked
 * @param {Map<string, string>} exprs
 * @returns {Map<string, string>}
 */
function laneGroups(ids, table, sources, marked, exprs) {
  /** @type {Map<string, string>} */
  const sig = new Map();
  /** @type {Map<string, string>} */
  const interned = new Map();
  for (let i = ids.length - 1; i >= 0; i--) {
    const id = ids[i];
    const n = /** @type {GraphNode} */ (table.get(id));
    const arg = n.op === "Const" ? "" : n.arg;
    const parts = [n.op, n.dtype, JSON.stringify(n.shape), arg, marked(id), exprs.has(id), .../** @type {[string, number][]} */ (sources.get(id)).map(([s, k]) => `${k}:${sig.get(s)}`)];
    const text = parts.join("|");
    if (!interned.has(text)) interned.set(text, `g${interned.size}`);
    sig.set(id, /** @type {string} */ (interned.get(text)));
  }
  return sig;
}

// A drawn node: the first of its members (all alike), with their count and, where they differ, the range of their
// constants; its lines of text and its size.
/**
 * @param {string} id
 * @param {string[]} members
 * @param {Table} table
 * @param {(id: string) => string | null} status
 * @param {Map<string, string>} exprs
 * @param {boolean} hub
 * @param {Map<string, string>} titles
 * @returns {DisplayNode}
 */
function node(id, members, table, status, exprs, hub, titles) {
  const first = /** @type {GraphNode} */ (table.get(members[0]));
  const count = members.length;
  const title = titles.get(members[0]) ?? `${first.op}${mergedArg(members.map((m) => /** @type {GraphNode} */ (table.get(m))), table)}${count > 1 ? ` ×${count}` : ""}`;
  const expr = exprs.get(members[0]);
  const shape = first.shape && first.shape.length ? `[${first.shape.map(dim).join(",")}]` : "";
  const many = first.src.length > FAN_IN_MAX ? `← ${first.src.length} src` : "";
  const sub = hub ? "" : [first.dtype, shape, many].filter(Boolean).join(" ");
  const lines = /** @type {DisplayNode["lines"]} */ (
    [
      { kind: "title", text: title },
      expr && { kind: "expr", text: clip(expr, MAX_EXPR) },
      sub && { kind: "sub", text: sub },
    ].filter(Boolean)
  );
  const fill = first.color;
  return {
    id,
    ref: first.id,
    refs: members,
    op: first.op,
    group: first.group ?? OTHER,
    axisType: first.axis_type,
    lines,
    expr: expr ?? null,
    hub,
    status: status(members[0]),
    fill,
    ink: textOn(fill),
    width: Math.ceil(Math.max(...lines.map((l) => l.text.length)) * CHAR_W + 2 * PAD_X),
    height: 9 + LINE_H * lines.length,
  };
}

/** @param {number | string} d */
const dim = (d) => (typeof d === "number" ? d : "s");
/** @type {(text: string, n: number) => string} */
const clip = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);

// The arg the members share, or the range of their numeric args ("0‥15"), or the first one's with "…".
/**
 * @param {GraphNode[]} nodes
 * @param {Table} table
 */
function mergedArg(nodes, table) {
  const args = nodes.map((n) => argText(n, table));
  if (args.every((a) => a === args[0])) return args[0];
  const values = nodes.map((n) => Number(n.arg));
  if (values.every((v) => Number.isFinite(v))) return ` ${Math.min(...values)}‥${Math.max(...values)}`;
  return `${args[0]}…`;
}

// The node's arg as the server spells it (short display text), with a Range's bound when it is a constant.
/**
 * @param {GraphNode} node
 * @param {Table} table
 */
export function argText(node, table) {
  let text = node.arg ? ` ${node.arg}` : "";
  if (node.op === "Range") {
    const bound = table.get(node.src[0]);
    if (bound?.op === "Const") text += ` n=${bound.arg}`;
  }
  return clip(text, MAX_ARG);
}

// The text a search matches a drawn node by: its op, title lines, index expression and the ids it stands for.
/** @param {DisplayNode} n */
export function searchText(n) {
  return `${n.op} ${n.lines.map((l) => l.text).join(" ")} ${n.expr ?? ""} ${n.refs.join(" ")}`.toLowerCase();
}

// How many nodes the graph under id holds (those the table has).
/**
 * @param {string} id
 * @param {Table} table
 */
function reachable(id, table) {
  const seen = new Set([id]);
  const stack = [id];
  while (stack.length) {
    for (const s of /** @type {GraphNode} */ (table.get(/** @type {string} */ (stack.pop()))).src) {
      if (table.has(s) && !seen.has(s)) {
        seen.add(s);
        stack.push(s);
      }
    }
  }
  return seen.size;
}
