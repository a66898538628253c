// A small element builder: h("div", {class: "x", onclick}, child, ...). Children may be nodes,
// strings or (nested) arrays; null and false are skipped.
/** @typedef {Node | string | number | false | null | undefined | Child[]} Child */
/** @typedef {Record<string, any>} Attrs an attribute's value (null or false: none), an on... listener, a dataset */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") el.style.cssText = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  append(el, children);
  return el;
}

/**
 * @param {Element | DocumentFragment} el
 * @param {Child[]} children
 */
function append(el, children) {
  for (const child of children) {
    if (child == null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

// Replaces the children of `el`. Focus inside it stays inside the app: on the new form control of the same
// class, else on the app itself, whose keys (arrows to step) keep working.
/**
 * @template {Element} E
 * @param {E} el
 * @param {...Child} children
 * @returns {E}
 */
export function fill(el, ...children) {
  const focused = el.contains(document.activeElement) ? document.activeElement : null;
  el.replaceChildren();
  append(el, children);
  if (focused) {
    const again = focused.matches("input, select") && el.querySelector(`.${focused.classList[0]}`);
    /** @type {HTMLElement | null} */ (again || el.closest("[tabindex]"))?.focus({ preventScroll: true });
  }
  return el;
}

// Black or white, whichever reads better on the background colour `hex` (#rrggbb).
/** @param {string} hex */
export function textOn(hex) {
  const n = parseInt(hex.slice(1), 16);
  const [r, g, b] = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.22 ? "#111" : "#fff";
}

// A 16px stroke-and-fill icon from SVG path data.
/** @param {string} d */
export function icon(d) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "uv-icon");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", d);
  svg.append(path);
  return svg;
}

// Whether an element takes typed text (a field, a code editor): a view must not take the keys from it.
/** @param {Element | null} el */
export function typing(el) {
  if (!el) return false;
  return /** @type {HTMLElement} */ (el).isContentEditable === true || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName);
}
