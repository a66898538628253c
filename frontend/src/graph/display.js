// Turns a step's node table into the graph that is drawn: the nodes reachable from the root (and the
// nodes the step removed), edges from each source to its user, and labels sized for a monospace font.
// Shared hub nodes (ranges, params, buffers, constants, variables) are drawn once per use, without their
// own sources, so a Range used by forty index expressions does not pull forty edges across the picture.
// A node with more than FAN_IN_MAX sources (a Linear program lists every instruction) keeps its edges in the
// layout but they are not drawn: the node says how many it has, and the inspector lists them.

import { textOn } from "../dom.js";

const HUB_OPS = new Set(["Range", "Param", "Buffer", "Const", "DefineVar"]);
const FAN_IN_MAX = 64;
const CHAR_W = 6.7; // width of one character of the node font (11px monospace)
const PAD_X = 8;
const MAX_ARG = 30; // characters of arg text in a node's title (the inspector shows it all)

// step: the /steps/{k} response; removedNodes: the nodes the step removed (by id), drawn beside the graph
// when given (the step's own table may hold them too).
export function displayGraph(step, removedNodes = null) {
  const table = new Map(removedNodes ?? []);
  for (const n of step.nodes) table.set(n.id, n);
  const added = new Set(step.added);
  const removed = removedNodes ? step.removed.filter((id) => table.has(id)) : [];
  const gone = new Set(removed);
  const roots = [step.root, ...removed];
  const order = usersFirst(roots, table);

  // Walk users before sources, so a node's uses are all known when it is reached.
  const uses = new Map(roots.map((id) => [id, []]));
  const hubs = new Set();
  for (const id of order) {
    const node = table.get(id);
    if (!uses.has(id)) continue; // only reachable through a hub's sources, which are not drawn
    if (HUB_OPS.has(node.op) && uses.get(id).length > 1) {
      hubs.add(id);
      continue;
    }
    node.src.forEach((s, i) => {
      if (!table.has(s)) return;
      if (!uses.has(s)) uses.set(s, []);
      uses.get(s).push([id, i]);
    });
  }

  const nodes = [];
  const edges = [];
  const status = (id) => (added.has(id) ? "added" : gone.has(id) ? "removed" : null);
  const fanIn = (id) => table.get(id).src.length > FAN_IN_MAX;
  for (const id of order) {
    if (!uses.has(id)) continue;
    const node = table.get(id);
    if (hubs.has(id)) {
      for (const [user, i] of uses.get(id)) {
        const copy = `${id}~${user}~${i}`;
        nodes.push(drawn(copy, node, table, status(id), true));
        edges.push({ v: copy, w: user, name: String(i), status: status(user), hidden: fanIn(user) });
      }
    } else {
      nodes.push(drawn(id, node, table, status(id), false));
      for (const [user, i] of uses.get(id)) edges.push({ v: id, w: user, name: String(i), status: status(user) ?? status(id), hidden: fanIn(user) });
    }
  }
  const key = `${step.root}|${removed.join(",")}`;
  return { key, root: step.root, nodes, edges, match: step.match, replacement: step.replacement };
}

// Every node reachable from `roots` through sources, each after all of its users.
function usersFirst(roots, table) {
  const seen = new Set();
  const post = [];
  for (const root of roots) {
    if (seen.has(root)) continue;
    const stack = [[root, 0]];
    seen.add(root);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const src = table.get(top[0]).src;
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

function drawn(id, node, table, status, hub) {
  const title = `${node.op}${argText(node, table)}`;
  const shape = node.shape && node.shape.length ? `[${node.shape.map(dim).join(",")}]` : "";
  const many = node.src.length > FAN_IN_MAX ? `← ${node.src.length} src` : "";
  const sub = hub ? "" : [node.dtype, shape, many].filter(Boolean).join(" ");
  const chars = Math.max(title.length, sub.length);
  const fill = node.color;
  return {
    id,
    ref: node.id,
    op: node.op,
    axisType: node.axis_type,
    title,
    sub,
    hub,
    status,
    fill,
    ink: textOn(fill),
    width: Math.ceil(chars * CHAR_W + 2 * PAD_X),
    height: sub ? 34 : 22,
  };
}

const dim = (d) => (typeof d === "number" ? d : "s");

// The node's arg as the server spells it (short display text), with a Range's bound when it is a constant.
export function argText(node, table) {
  let text = node.arg ? ` ${node.arg}` : "";
  if (node.op === "Range") {
    const bound = table.get(node.src[0]);
    if (bound?.op === "Const") text += ` n=${bound.arg}`;
  }
  return text.length > MAX_ARG ? `${text.slice(0, MAX_ARG - 1)}…` : text;
}
