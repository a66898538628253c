import assert from "node:assert/strict";
import { test } from "node:test";
import { escapeHtml, highlight, highlightDiff, highlightListing } from "../src/highlight.js";

/** @param {string} kind @param {string} html */
const tok = (kind, html) => `<span class="uv-tok-${kind}">${html}</span>`;

test("escapeHtml escapes what could start markup or end an attribute", () => {
  assert.equal(escapeHtml(`<a href="x">&amp;</a>`), "&lt;a href=&quot;x&quot;&gt;&amp;amp;&lt;/a&gt;");
  assert.equal(escapeHtml("plain 'text'"), "plain 'text'");
});

test("C: types, keywords, calls, numbers, comments, strings and preprocessor lines", () => {
  assert.equal(highlight("int x = 42; // hi", "c"), `${tok("type", "int")} x = ${tok("num", "42")}; ${tok("comment", "// hi")}`);
  assert.equal(
    highlight('#include <stdio.h>\nif (a<b) return foo(0x1F, 1.5f, "<\\"");', "c"),
    `${tok("pre", "#include &lt;stdio.h&gt;")}\n${tok("kw", "if")} (a&lt;b) ${tok("kw", "return")} ${tok("fn", "foo")}(${tok("num", "0x1F")}, ${tok("num", "1.5f")}, ${tok("str", "&quot;&lt;\\&quot;&quot;")});`,
  );
  // a call may have space before its parenthesis; a word before anything else is plain
  assert.equal(highlight("f (1) g", "c"), `${tok("fn", "f")} (${tok("num", "1")}) g`);
  assert.equal(highlight("/* a\n b */x", "c"), `${tok("comment", "/* a\n b */")}x`);
});

test("a # inside a C line is no preprocessor line", () => {
  assert.equal(highlight("x # y", "c"), "x # y");
});

test("Python: keywords, constants, calls, comments and triple-quoted strings", () => {
  assert.equal(
    highlight('def f(x):\n    return MAX_N + None  # note\ns = """a\nb"""', "python"),
    `${tok("kw", "def")} ${tok("fn", "f")}(x):\n    ${tok("kw", "return")} ${tok("const", "MAX_N")} + ${tok("kw", "None")}  ${tok("comment", "# note")}\ns = ${tok("str", "&quot;&quot;&quot;a\nb&quot;&quot;&quot;")}`,
  );
  // one capital letter is no constant; a C keyword is no Python keyword
  assert.equal(highlight("X while struct", "python"), `X ${tok("kw", "while")} struct`);
});

test("highlighting keeps every character of the input, escaped", () => {
  const code = 'float4 v = (float4)(a[i], 1e-3f, "\\n", 0);\n#define N 8 // <n>\n  for (;;) { x <<= 2; }';
  const html = highlight(code, "c");
  const text = html.replace(/<span class="uv-tok-\w+">|<\/span>/g, "");
  assert.equal(text, escapeHtml(code));
});

test("a diff's file names, hunks, added and removed lines", () => {
  assert.equal(
    highlightDiff("--- a\n+++ b\n@@ -1,2 +1,2 @@\n-x\n+y\n z<"),
    [tok("diff-file", "--- a"), tok("diff-file", "+++ b"), tok("diff-hunk", "@@ -1,2 +1,2 @@"), tok("diff-del", "-x"), tok("diff-add", "+y"), " z&lt;"].join("\n"),
  );
});

test("in a hunk, a removed line '--i;' and an added line '++j;' are lines, not file names", () => {
  assert.equal(
    highlightDiff("--- a\n+++ b\n@@ -1 +1 @@\n---i;\n+++j;"),
    [tok("diff-file", "--- a"), tok("diff-file", "+++ b"), tok("diff-hunk", "@@ -1 +1 @@"), tok("diff-del", "---i;"), tok("diff-add", "+++j;")].join("\n"),
  );
});

test("a Linear listing: the op in its group's colour, operands marked, other lines escaped", () => {
  const color = (/** @type {string} */ op) => (op === "Add" ? "#abc" : undefined);
  assert.equal(
    highlightListing("  3  Add  index  %1 %12 <x>\n 4  Mul  %3\nnot a line <", color),
    [
      `  ${tok("num", "3")}  <span class="uv-tok-op" style="color:#abc">Add</span>  index  ${tok("ref", "%1")} ${tok("ref", "%12")} &lt;x&gt;`,
      ` ${tok("num", "4")}  Mul  ${tok("ref", "%3")}`,
      "not a line &lt;",
    ].join("\n"),
  );
});
