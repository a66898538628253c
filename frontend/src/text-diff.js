// A unified diff of two texts by lines (longest common subsequence), as `diff -u` writes it: what a kernel's source
// became when one more opt was applied. Kernel sources are at most a few thousand lines, so the quadratic table is
// small; lines the texts share at both ends are set aside first.

/** @typedef {[" " | "-" | "+", string]} Op a line of the edit script: [kind, line] */

/**
 * @param {string} before
 * @param {string} after
 * @param {[string, string]} [names]
 * @param {number} [context]
 */
export function unifiedDiff(before, after, names = ["before", "after"], context = 3) {
  return formatDiff(editScript(before.split("\n"), after.split("\n")), names, context);
}

// The edit script of two lists of keys (lines, or node ids): [kind, key], kind " " (both), "-" (a only), "+" (b
// only); the keys both lists start and end with are set aside before the quadratic part.
/**
 * @param {string[]} a
 * @param {string[]} b
 * @returns {Op[]}
 */
export function editScript(a, b) {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  return [...a.slice(0, head).map((t) => /** @type {Op} */ ([" ", t])), ...middle(a.slice(head, a.length - tail), b.slice(head, b.length - tail)), ...a.slice(a.length - tail).map((t) => /** @type {Op} */ ([" ", t]))];
}

// An edit script of lines as `diff -u` writes it ("" when nothing changed).
/**
 * @param {Op[]} ops
 * @param {[string, string]} names
 * @param {number} context
 */
export function formatDiff(ops, names, context) {
  if (!ops.some(([k]) => k !== " ")) return "";
  return [`--- ${names[0]}`, `+++ ${names[1]}`, ...hunks(ops, context)].join("\n");
}

// The edit script of two line lists: [kind, line] with kind " " (both), "-" (before only) or "+" (after only).
/**
 * @param {string[]} a
 * @param {string[]} b
 */
function middle(a, b) {
  const [n, m] = [a.length, b.length];
  const lcs = new Uint32Array((n + 1) * (m + 1)); // lcs[i*(m+1)+j]: common lines of a[i:] and b[j:]
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i * (m + 1) + j] = a[i] === b[j] ? lcs[(i + 1) * (m + 1) + j + 1] + 1 : Math.max(lcs[(i + 1) * (m + 1) + j], lcs[i * (m + 1) + j + 1]);
    }
  }
  /** @type {Op[]} */
  const out = [];
  let [i, j] = [0, 0];
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push([" ", a[i++]]);
      j++;
    } else if (lcs[(i + 1) * (m + 1) + j] >= lcs[i * (m + 1) + j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

// The changed lines with `context` lines around them, in "@@ -l,s +l,s @@" hunks (changes at most twice the context
// apart share one, as diff -u joins hunks whose context would meet).
/**
 * @param {Op[]} ops
 * @param {number} context
 */
function hunks(ops, context) {
  const changed = ops.map(([k]) => k !== " ");
  /** @type {string[]} */
  const out = [];
  let i = 0;
  while (i < ops.length) {
    if (!changed[i]) {
      i++;
      continue;
    }
    let last = i;
    for (let j = i + 1; j < ops.length && j - last <= 2 * context + 1; j++) if (changed[j]) last = j;
    const start = Math.max(0, i - context);
    const end = Math.min(ops.length, last + context + 1);
    const [aStart, bStart] = positions(ops, start);
    const part = ops.slice(start, end);
    const aLen = part.filter(([k]) => k !== "+").length;
    const bLen = part.filter(([k]) => k !== "-").length;
    out.push(`@@ -${aStart + 1},${aLen} +${bStart + 1},${bLen} @@`, ...part.map(([k, t]) => k + t));
    i = end;
  }
  return out;
}

// The line numbers (0-based) in before and after at which ops[index] stands.
/**
 * @param {Op[]} ops
 * @param {number} index
 */
function positions(ops, index) {
  let [a, b] = [0, 0];
  for (const [k] of ops.slice(0, index)) {
    if (k !== "+") a++;
    if (k !== "-") b++;
  }
  return [a, b];
}
