// Syntax highlighting to HTML (every piece of input is escaped): C-family kernel sources, the Python of
// rewrite rules, unified diffs and Linear listings. Tokens become <span class="uv-tok-KIND">.

/** @param {string} text */
const words = (text) => new Set(text.split(/\s+/));
const C_KEYWORDS = words(`if else for while do return break continue switch case default goto sizeof typedef
  struct union enum const restrict volatile static inline extern register __restrict__ __kernel kernel __global
  global __local local __constant constant __private __attribute__ __global__ __device__ __shared__
  __syncthreads barrier CLK_LOCAL_MEM_FENCE CLK_GLOBAL_MEM_FENCE`);
const C_TYPES = words(`void char short int long float double bool unsigned signed size_t half uchar ushort uint
  ulong int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t float2 float4 float8 half2 half4 int2 int4`);
const PY_KEYWORDS = words(`and as assert break class continue def del elif else except finally for from global if
  import in is lambda nonlocal not or pass raise return try while with yield None True False`);

const NUMBER = String.raw`(?<num>\b(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][+-]?\d+)?[fFuUlL]*)\b)`;
const WORD = String.raw`(?<word>[A-Za-z_]\w*)`;
const DQ = String.raw`"(?:\\.|[^"\\\n])*"`;
const SQ = String.raw`'(?:\\.|[^'\\\n])*'`;

/** @typedef {"c" | "python"} Lang */
/** @type {Record<Lang, {token: RegExp, word: (w: string, next: string | undefined) => string | null}>} */
const LANGS = {
  c: {
    token: new RegExp(
      String.raw`(?<comment>\/\/[^\n]*|\/\*[\s\S]*?\*\/)|(?<pre>^[ \t]*#[^\n]*)|(?<str>${DQ}|${SQ})|${NUMBER}|${WORD}`,
      "gm",
    ),
    word: (w, next) => (C_KEYWORDS.has(w) ? "kw" : C_TYPES.has(w) ? "type" : next === "(" ? "fn" : null),
  },
  python: {
    token: new RegExp(
      String.raw`(?<comment>#[^\n]*)|(?<str>"""[\s\S]*?"""|'''[\s\S]*?'''|${DQ}|${SQ})|${NUMBER}|${WORD}`,
      "gm",
    ),
    word: (w, next) => (PY_KEYWORDS.has(w) ? "kw" : /^[A-Z][A-Z_0-9]+$/.test(w) ? "const" : next === "(" ? "fn" : null),
  },
};

/** @param {string} text */
export function escapeHtml(text) {
  return text.replace(/[&<>"]/g, (c) => /** @type {Record<string, string>} */ ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** @type {(kind: string, text: string) => string} */
const span = (kind, text) => `<span class="uv-tok-${kind}">${escapeHtml(text)}</span>`;

/**
 * @param {string} code
 * @param {Lang} lang
 */
export function highlight(code, lang) {
  const { token, word } = LANGS[lang];
  let html = "";
  let last = 0;
  for (const m of code.matchAll(token)) {
    html += escapeHtml(code.slice(last, m.index));
    last = m.index + m[0].length;
    const { comment, pre, str, num } = /** @type {Record<string, string | undefined>} */ (m.groups); // every token has groups
    const kind = comment ? "comment" : pre ? "pre" : str ? "str" : num ? "num" : word(m[0], code.slice(last).match(/^\s*(.)/)?.[1]);
    html += kind ? span(kind, m[0]) : escapeHtml(m[0]);
  }
  return html + escapeHtml(code.slice(last));
}

/** @param {string} diff */
export function highlightDiff(diff) {
  let inHunks = false; // "---" and "+++" name the files only before the first hunk; in one, they are lines ("--i;")
  return diff
    .split("\n")
    .map((line) => {
      if (line.startsWith("@@")) inHunks = true;
      const kind = !inHunks && /^(\+\+\+|---)/.test(line) ? "file" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : line.startsWith("@@") ? "hunk" : null;
      return kind ? span(`diff-${kind}`, line) : escapeHtml(line);
    })
    .join("\n");
}

// Linear listings ("12  Add  index  %11 %10"): the op coloured by its SPEC group, operands %n marked.
/**
 * @param {string} text
 * @param {(op: string) => string | undefined} opColor
 */
export function highlightListing(text, opColor) {
  return text
    .split("\n")
    .map((line) => {
      const m = line.match(/^(\s*)(\d+)(\s+)([A-Za-z]\w*)(.*)$/);
      if (!m) return escapeHtml(line);
      const color = opColor(m[4]);
      const op = color ? `<span class="uv-tok-op" style="color:${color}">${escapeHtml(m[4])}</span>` : escapeHtml(m[4]);
      const rest = m[5].split(/(%\d+)/).map((part, i) => (i % 2 ? span("ref", part) : escapeHtml(part)));
      return `${escapeHtml(m[1])}${span("num", m[2])}${m[3]}${op}${rest.join("")}`;
    })
    .join("\n");
}
