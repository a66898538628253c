import assert from "node:assert/strict";
import { test } from "node:test";
import { unifiedDiff } from "../src/text-diff.js";

/** @param {number} n */
const lines = (n, name = "L") => Array.from({ length: n }, (_, i) => `${name}${i + 1}`);

// Applies a unified diff to `before`, checking every context and removed line against it (as patch would).
/**
 * @param {string} before
 * @param {string} diff
 */
function applyDiff(before, diff) {
  const src = before.split("\n");
  /** @type {string[]} */
  const out = [];
  let at = 0; // lines of src used
  const body = diff.split("\n").slice(2);
  for (let i = 0; i < body.length; i++) {
    const m = body[i].match(/^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$/);
    assert.ok(m, `a hunk header, not ${JSON.stringify(body[i])}`);
    const start = Number(m[1]) - 1;
    assert.ok(start >= at, "hunks in order, not overlapping");
    out.push(...src.slice(at, start));
    at = start;
    let [aLen, bLen] = [0, 0];
    while (i + 1 < body.length && !body[i + 1].startsWith("@@")) {
      const line = body[++i];
      const [kind, text] = [line[0], line.slice(1)];
      if (kind === "+") {
        out.push(text);
        bLen++;
      } else {
        assert.equal(src[at], text, `line ${at + 1} of before`);
        at++;
        aLen++;
        if (kind === " ") {
          out.push(text);
          bLen++;
        } else assert.equal(kind, "-");
      }
    }
    assert.deepEqual([aLen, bLen], [Number(m[2]), Number(m[4])], "the hunk's lengths");
  }
  return [...out, ...src.slice(at)].join("\n");
}

test("texts alike have no diff", () => {
  assert.equal(unifiedDiff("", ""), "");
  assert.equal(unifiedDiff("a\nb", "a\nb"), "");
});

test("a changed line, with its context and the names in the header", () => {
  assert.equal(unifiedDiff("a\nb\nc", "a\nB\nc", ["old.c", "new.c"]), ["--- old.c", "+++ new.c", "@@ -1,3 +1,3 @@", " a", "-b", "+B", " c"].join("\n"));
});

test("context is cut to `context` lines around a change, and line numbers count from the hunk", () => {
  const before = lines(20);
  const after = before.map((l) => (l === "L10" ? "X10" : l));
  assert.equal(unifiedDiff(before.join("\n"), after.join("\n"), ["a", "b"], 2), ["--- a", "+++ b", "@@ -8,5 +8,5 @@", " L8", " L9", "-L10", "+X10", " L11", " L12"].join("\n"));
});

test("an insertion and a deletion count their lines on one side only", () => {
  assert.equal(unifiedDiff("a\nc", "a\nb\nc", ["a", "b"], 1), ["--- a", "+++ b", "@@ -1,2 +1,3 @@", " a", "+b", " c"].join("\n"));
  assert.equal(unifiedDiff("a\nb\nc", "a\nc", ["a", "b"], 1), ["--- a", "+++ b", "@@ -1,3 +1,2 @@", " a", "-b", " c"].join("\n"));
});

test("changes twice the context apart share a hunk, as diff -u joins them; further apart they do not", () => {
  const before = lines(6).join("\n");
  // two unchanged lines between the changes, context 1: the contexts meet, one hunk (GNU diff -U1 writes the same)
  assert.equal(
    unifiedDiff(before, "X1\nL2\nL3\nX4\nL5\nL6", ["a", "b"], 1),
    ["--- a", "+++ b", "@@ -1,5 +1,5 @@", "-L1", "+X1", " L2", " L3", "-L4", "+X4", " L5"].join("\n"),
  );
  // three unchanged lines between them: two hunks
  assert.equal(
    unifiedDiff(before, "X1\nL2\nL3\nL4\nX5\nL6", ["a", "b"], 1),
    ["--- a", "+++ b", "@@ -1,2 +1,2 @@", "-L1", "+X1", " L2", "@@ -4,3 +4,3 @@", " L4", "-L5", "+X5", " L6"].join("\n"),
  );
});

test("the lines both texts share at the ends stay context even when the middle is all new", () => {
  const diff = unifiedDiff("head\nx\ny\ntail", "head\np\nq\nr\ntail", ["a", "b"], 5);
  assert.equal(diff, ["--- a", "+++ b", "@@ -1,4 +1,5 @@", " head", "-x", "-y", "+p", "+q", "+r", " tail"].join("\n"));
});

test("applying the diff to the text before gives the text after (random edits, several contexts)", () => {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
  for (let round = 0; round < 300; round++) {
    const before = lines(1 + Math.floor(random() * 30));
    const after = [];
    for (const line of before) {
      const r = random();
      if (r < 0.1) continue; // deleted
      after.push(r < 0.2 ? `${line}'` : line); // changed or kept
      if (r > 0.9) after.push(`new${round}`); // inserted
    }
    const [a, b] = [before.join("\n"), after.join("\n")];
    const context = Math.floor(random() * 4);
    const diff = unifiedDiff(a, b, ["a", "b"], context);
    if (a === b) assert.equal(diff, "");
    else assert.equal(applyDiff(a, diff), b, `context ${context}:\n${diff}`);
  }
});
