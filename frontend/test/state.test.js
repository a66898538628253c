import assert from "node:assert/strict";
import { test } from "node:test";
import { emptyState, formatHash, parseHash } from "../src/state.js";
import { META } from "./fixtures.js";

const TABS = ["rewrite", "kernel", "beam", "trace"];

test("no trace chosen: no hash, and an empty hash is the empty state", () => {
  assert.equal(formatHash(emptyState()), "");
  assert.deepEqual(parseHash("", META, TABS), emptyState());
  assert.deepEqual(parseHash("#", META, TABS), emptyState());
});

test("formatHash writes the parts that differ from the defaults", () => {
  assert.equal(formatHash({ ...emptyState(), tid: "gemm", ci: 1, pi: 3, k: 5 }), "#/t/gemm/c/1/p/3/s/5");
  const full = { tid: "a b/c", ci: 0, pi: 2, k: 0, opts: [{ op: "SPLIT", axis: 0, arg: [4, "UPCAST", false] }], tab: "beam", search: 12, node: "0123456789abcdef", query: "r0 / 4", calls: ["00000000000000aa", "00000000000000bb"] };
  assert.equal(formatHash(full), "#/t/a%20b%2Fc/c/0/p/2/s/0/o/SPLIT:0:4:UPCAST:0/v/beam/b/12/n/0123456789abcdef/q/r0%20%2F%204/e/00000000000000aa,00000000000000bb");
  assert.deepEqual(parseHash(formatHash(full), META, TABS), full);
});

test("opts [] (none) and null (as compiled) stay apart", () => {
  const none = { ...emptyState(), tid: "t", ci: 0, opts: [] };
  assert.equal(formatHash(none), "#/t/t/c/0/p/0/s/0/o/-");
  assert.deepEqual(parseHash(formatHash(none), META, TABS).opts, []);
  const compiled = { ...emptyState(), tid: "t", ci: 0 };
  assert.equal(formatHash(compiled), "#/t/t/c/0/p/0/s/0");
  assert.equal(parseHash(formatHash(compiled), META, TABS).opts, null);
});

test("parts that do not parse are left at their defaults; the rest is kept", () => {
  const s = parseHash("#/t/x/c/one/p/-2/s/7/v/nosuchtab/o/FOO:1", META, TABS);
  assert.deepEqual(s, { ...emptyState(), tid: "x", k: 7 });
  // a key without a value, and unknown keys
  assert.deepEqual(parseHash("#/t/x/zz/3/c", META, TABS), { ...emptyState(), tid: "x" });
});

test("a malformed %-escape spoils only its own part", () => {
  assert.deepEqual(parseHash("#/t/%E0%A4%A/c/2", META, TABS), { ...emptyState(), ci: 2 });
  assert.deepEqual(parseHash("#/t/gemm/o/%/s/4", META, TABS), { ...emptyState(), tid: "gemm", k: 4 });
});

test("keys that name an Object.prototype member set nothing", () => {
  for (const key of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
    const s = parseHash(`#/${key}/3/t/x`, META, TABS);
    assert.deepEqual(Object.keys(s).sort(), Object.keys(emptyState()).sort(), key);
    assert.equal(s.tid, "x");
  }
});

test("a node part that is no node id is left out", () => {
  assert.equal(parseHash("#/t/x/n/Add", META, TABS).node, null);
  assert.equal(parseHash("#/t/x/n/0123456789abcdef/q/", META, TABS).node, "0123456789abcdef");
});

test("the opened Calls part keeps node ids only, each once", () => {
  assert.deepEqual(parseHash("#/t/x/e/00000000000000aa,Call,00000000000000aa,,00000000000000bb", META, TABS).calls, ["00000000000000aa", "00000000000000bb"]);
  assert.deepEqual(parseHash("#/t/x/e/", META, TABS).calls, []);
  assert.equal(formatHash({ ...emptyState(), tid: "x", ci: 0, calls: [] }), "#/t/x/c/0/p/0/s/0");
});
