// Draws a laid-out display graph as SVG: pan and zoom (d3-zoom), nodes coloured by op group (Range nodes by
// AxisType), what the step added outlined, what it removed dashed and faded, the ancestors it rebuilt dashed blue;
// an edge into an op whose operands are ordered says which operand it is; a click selects a node.
// Only what lies in and around the view is in the DOM: elements are added a slice per animation frame as
// the view moves and dropped when far outside it, so a graph of thousands of nodes stays light to draw,
// pan and zoom, and the page keeps answering while it appears. A minimap shows the whole graph and where the view
// is when the view does not hold it all; a click or a drag on it moves the view there.

import { select } from "d3-selection";
import { zoom, zoomIdentity } from "d3-zoom";
/** @import { ZoomBehavior, ZoomTransform } from "d3-zoom" */
/** @import { DisplayEdge, DisplayGraph, DisplayNode, Layout } from "../../types/ui" */
/** @typedef {[number, number, number, number]} Box [x0, y0, x1, y1] */
/** @typedef {DisplayNode & {x: number, y: number, box: Box}} PlacedNode a drawn node where the layout put it */
/** @typedef {DisplayEdge & {points: number[], box: Box}} PlacedEdge */
/** @typedef {{top: number, bottom: number}} Insets */

const SVG_NS = "http://www.w3.org/2000/svg";
const SLICE = 250; // nodes (and as many edges) added per frame
const NEAR = 0.5; // draw what lies within half a view of the view...
const FAR = 1.5; // ...and drop what lies more than one and a half views away
const READABLE = 0.85; // the smallest scale whose node text (11 px) reads well: a view pans rather than shrink below it
const MAX_SCALE = 1.25; // a small graph is not blown up past this
const FOCUS_PAD = 48; // room around what a step changed when it is framed
const MINIMAP = { width: 200, height: 130, share: 0.24 }; // at most this big, and this share of the view's width

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
const svgEl = (tag, attrs) => {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, /** @type {string} */ (v)); // numbers as their text
  return el;
};

export class GraphView {
  // insets(): {top, bottom}, the pixels of the view that the tools above and the legend below cover.
  /**
   * @param {HTMLElement} container
   * @param {(ref: string | null) => void} onSelect
   * @param {() => Insets} [insets]
   */
  constructor(container, onSelect, insets = () => ({ top: 44, bottom: 12 })) {
    this.insets = insets;
    this.svg = select(container).append("svg").attr("class", "uv-graph-svg");
    const defs = this.svg.append("defs");
    for (const kind of ["plain", "added", "removed", "rebuilt"]) {
      defs
        .append("marker")
        .attr("id", `uv-arrow-${kind}`)
        .attr("class", `uv-arrow uv-arrow-${kind}`)
        .attr("viewBox", "0 0 10 10")
        .attr("refX", 9)
        .attr("refY", 5)
        .attr("markerWidth", 7)
        .attr("markerHeight", 7)
        .attr("orient", "auto-start-reverse")
        .append("path")
        .attr("d", "M0,0 L10,5 L0,10 z");
    }
    this.viewport = this.svg.append("g");
    this.edgeLayer = /** @type {SVGGElement} */ (this.viewport.append("g").attr("class", "uv-edges").node());
    this.nodeLayer = /** @type {SVGGElement} */ (this.viewport.append("g").attr("class", "uv-nodes").node());
    /** @type {ZoomTransform} */
    this.transform = zoomIdentity;
    this.zoom = /** @type {ZoomBehavior<SVGSVGElement, unknown>} */ (zoom())
      .scaleExtent([0.02, 4])
      .on("zoom", (event) => {
        if (event.sourceEvent) this.userMoved = true; // a person panned or zoomed: keep their view
        this.transform = event.transform;
        this.viewport.attr("transform", event.transform);
        this.scheduleFill();
      });
    this.svg.call(this.zoom).on("dblclick.zoom", null);
    this.svg.on("click", (event) => {
      const el = event.target.closest(".uv-node");
      onSelect(el ? this.nodes[Number(el.dataset.index)].ref : null);
    });
    this.minimap = new Minimap(container, (x, y) => this.centreAt(x, y, this.transform.k));
    /** @type {PlacedNode[]} */
    this.nodes = [];
    /** @type {PlacedEdge[]} */
    this.edges = [];
    /** @type {Map<number, SVGElement>} */
    this.nodeEls = new Map(); // index -> element, for the nodes now in the DOM
    /** @type {Map<number, SVGElement>} */
    this.edgeEls = new Map();
    this.size = { width: 0, height: 0 };
    /** @type {string | null} */
    this.selected = null;
    /** @type {Set<number>} */
    this.found = new Set(); // indices of the nodes a search found
    this.userMoved = false;
    this.fillPending = false;
    /** @type {((complete: boolean) => void)[]} */
    this.waiters = [];
    /** @type {PlacedNode[]} */
    this.focus = [];
    // A view made wider or narrower (a panel dragged, the window resized) keeps what it shows in the middle; one
    // the person has not moved is framed anew for its new size.
    this.shown = { width: 0, height: 0 };
    this.resizes = new ResizeObserver(() => this.resized());
    this.resizes.observe(container);
  }

  resized() {
    const { width, height } = this.viewSize();
    const was = this.shown;
    this.shown = { width, height };
    if (!width || !height || !was.width || !this.nodes.length || (width === was.width && height === was.height)) return;
    if (!this.userMoved) this.frame(this.focus);
    else {
      const t = this.transform;
      const [x, y] = [(was.width / 2 - t.x) / t.k, (was.height / 2 - t.y) / t.k];
      this.svg.call(this.zoom.transform, zoomIdentity.translate(width / 2 - x * t.k, height / 2 - y * t.k).scale(t.k));
    }
    this.minimap.draw(this.nodes, this.size, width);
    this.updateMinimap();
  }

  // Stops following the container's size (the view is going away).
  destroy() {
    this.resizes.disconnect();
  }

  // Draws `display` at the positions of `layout`. fit: a new pass, framed anew; within a pass each step is
  // framed the same way until the person pans or zooms, and from then on their view is kept unless what the
  // step changed is out of sight. Resolves once the view is drawn: true, or false when a newer draw came first.
  /**
   * @param {DisplayGraph} display
   * @param {Layout} layout
   * @param {boolean} fit
   * @returns {Promise<boolean>}
   */
  draw(display, layout, fit) {
    this.settle(false);
    this.size = { width: layout.width, height: layout.height };
    this.nodes = display.nodes.map((n, i) => {
      const [x, y] = layout.nodes[i];
      return { ...n, x, y, box: /** @type {Box} */ ([x - n.width / 2, y - n.height / 2, x + n.width / 2, y + n.height / 2]) };
    });
    this.edges = display.edges.flatMap((e, i) => (e.hidden ? [] : [{ ...e, points: layout.edges[i], box: bounds(layout.edges[i]) }]));
    /** @type {(n: DisplayNode) => string | null} the class of the step's replacement and match */
    this.special = (n) => (n.refs.includes(/** @type {string} */ (display.replacement)) ? "uv-replacement" : n.refs.includes(/** @type {string} */ (display.match)) ? "uv-match" : null);
    this.found = new Set();
    this.nodeEls.clear();
    this.edgeEls.clear();
    this.edgeLayer.replaceChildren();
    this.nodeLayer.replaceChildren();
    this.svg.attr("data-key", null).attr("data-nodes", null);
    this.root = this.nodes.find((n) => n.ref === display.root);
    const focus = (this.focus = this.focusOf());
    this.shown = { width: this.viewSize().width, height: this.viewSize().height };
    if (fit) this.userMoved = false;
    if (!this.userMoved) this.frame(focus);
    else if (focus.length && !focus.some((n) => meets(n.box, this.viewRect(0)))) this.centre(focus[0], Math.max(this.transform.k, READABLE));
    this.minimap.draw(this.nodes, this.size, this.viewSize().width);
    this.updateMinimap();
    /** @type {Promise<boolean>} */
    const done = new Promise((resolve) => this.waiters.push(resolve));
    this.scheduleFill();
    return done.then((complete) => {
      if (complete) {
        // for tests: the scale, and whether what the step changed is in the free part of the view
        const [top, height] = this.free();
        const { width } = this.viewSize();
        const t = this.transform;
        /** @param {PlacedNode} n */
        const inView = (n) => { const [x, y] = [n.x * t.k + t.x, n.y * t.k + t.y]; return x >= 0 && x <= width && y >= top && y <= top + height; };
        this.svg.attr("data-key", display.key).attr("data-nodes", this.nodes.length).attr("data-scale", t.k.toFixed(3)).attr("data-focus", focus.length ? String(inView(focus[0])) : "none");
      }
      return complete;
    });
  }

  // What a step changed, the replacement first: the nodes to frame.
  focusOf() {
    /** @param {PlacedNode} n */
    const rank = (n) => (this.special(n) === "uv-replacement" ? 0 : this.special(n) === "uv-match" ? 1 : n.status === "added" ? 2 : n.status === "removed" ? 3 : 4);
    return this.nodes.filter((n) => rank(n) < 4).sort((a, b) => rank(a) - rank(b));
  }

  /** @param {boolean} complete */
  settle(complete) {
    for (const resolve of this.waiters.splice(0)) resolve(complete);
  }

  scheduleFill() {
    if (this.fillPending) return;
    this.fillPending = true;
    requestAnimationFrame(() => {
      this.fillPending = false;
      this.fill();
    });
  }

  // One frame's work: drop elements far outside the view, add up to SLICE of those near it that are missing.
  fill() {
    const far = this.viewRect(FAR);
    for (const [els, items] of /** @type {[Map<number, SVGElement>, {box: Box}[]][]} */ ([
      [this.nodeEls, this.nodes],
      [this.edgeEls, this.edges],
    ])) {
      for (const [i, el] of els) {
        if (!meets(items[i].box, far)) {
          el.remove();
          els.delete(i);
        }
      }
    }
    const near = this.viewRect(NEAR);
    const moreEdges = this.add(this.edges, this.edgeEls, this.edgeLayer, near, (e) => edgeElement(e));
    const moreNodes = this.add(this.nodes, this.nodeEls, this.nodeLayer, near, (n, i) => this.nodeElement(n, i));
    const more = moreEdges || moreNodes;
    this.updateMinimap();
    if (more) this.scheduleFill();
    else this.settle(true);
  }

  // Adds up to SLICE missing elements of `items` that meet `rect`; says whether more remain.
  /**
   * @template {{box: Box}} T
   * @param {T[]} items
   * @param {Map<number, SVGElement>} els
   * @param {SVGGElement} layer
   * @param {Box} rect
   * @param {(item: T, index: number) => SVGElement} make
   */
  add(items, els, layer, rect, make) {
    const fragment = document.createDocumentFragment();
    let budget = SLICE;
    for (let i = 0; i < items.length; i++) {
      if (els.has(i) || !meets(items[i].box, rect)) continue;
      if (budget-- === 0) break;
      const el = make(items[i], i);
      els.set(i, el);
      fragment.append(el);
    }
    layer.append(fragment);
    return budget < 0;
  }

  // The view in graph coordinates, grown by `margin` views on every side: [x0, y0, x1, y1].
  /**
   * @param {number} margin
   * @returns {Box}
   */
  viewRect(margin) {
    const { width, height } = this.viewSize();
    const t = this.transform;
    const [x0, y0, x1, y1] = [-t.x / t.k, -t.y / t.k, (width - t.x) / t.k, (height - t.y) / t.k];
    const [mx, my] = [(x1 - x0) * margin, (y1 - y0) * margin];
    return [x0 - mx, y0 - my, x1 + mx, y1 + my];
  }

  // The minimap's frame; see-through (until pointed at) while it lies over a drawn node, which it would hide.
  updateMinimap() {
    this.minimap.view(this.viewRect(0), this.size);
    const canvas = this.minimap.canvas;
    let over = false;
    if (!canvas.hidden) {
      const [c, v, t] = [canvas.getBoundingClientRect(), this.viewSize(), this.transform];
      /** @type {Box} the minimap's rectangle in the graph's coordinates */
      const rect = [(c.left - v.left - t.x) / t.k, (c.top - v.top - t.y) / t.k, (c.right - v.left - t.x) / t.k, (c.bottom - v.top - t.y) / t.k];
      over = [...this.nodeEls.keys()].some((i) => meets(this.nodes[i].box, rect));
    }
    canvas.classList.toggle("uv-over-nodes", over);
  }

  viewSize() {
    return /** @type {SVGSVGElement} */ (this.svg.node()).getBoundingClientRect();
  }

  /**
   * @param {PlacedNode} d
   * @param {number} index
   */
  nodeElement(d, index) {
    const cls = ["uv-node", d.hub && "uv-hub", d.axisType && "uv-range", d.status && `uv-${d.status}`, this.special(d), d.refs.includes(/** @type {string} */ (this.selected)) && "uv-selected", this.found.has(index) && "uv-found", d.refs.length > 1 && "uv-many"];
    const g = svgEl("g", {
      class: cls.filter(Boolean).join(" "),
      transform: `translate(${d.box[0]},${d.box[1]})`,
      "data-index": index,
      "data-ref": d.ref,
      "data-op": d.op,
      "data-count": d.refs.length,
    });
    if (d.axisType) g.setAttribute("data-axis-type", d.axisType);
    if (d.refs.length > 1) g.append(svgEl("rect", { class: "uv-stack", x: 3, y: 3, width: d.width, height: d.height, rx: 4, fill: d.fill }));
    g.append(svgEl("rect", { width: d.width, height: d.height, rx: d.hub || d.axisType ? Math.min(11, d.height / 2) : 4, fill: d.fill }));
    d.lines.forEach((line, i) => {
      const text = svgEl("text", { class: `uv-node-${line.kind}`, x: d.width / 2, y: 15 + 13 * i, fill: d.ink });
      text.textContent = line.text;
      g.append(text);
    });
    if (d.expr) {
      const tip = svgEl("title", {});
      tip.textContent = `${d.lines[0].text} ${d.expr}`;
      g.append(tip);
    }
    return g;
  }

  // The first view of a step: all of the graph where that reads well; else what the step changed, framed as
  // close as reads well (the replacement in the middle when all of it does not fit); else the root.
  /** @param {PlacedNode[]} focus */
  frame(focus) {
    if (!this.viewSize().width || !this.size.width) return;
    if (this.fitScale(this.size.width, this.size.height) >= READABLE) return this.fit();
    if (!focus.length) return this.root && this.centre(this.root, READABLE, 0.85);
    /** @type {Box} */
    const box = focus.reduce((/** @type {Box} */ b, n) => [Math.min(b[0], n.box[0]), Math.min(b[1], n.box[1]), Math.max(b[2], n.box[2]), Math.max(b[3], n.box[3])], /** @type {Box} */ ([Infinity, Infinity, -Infinity, -Infinity]));
    const scale = Math.min(MAX_SCALE, this.fitScale(box[2] - box[0] + 2 * FOCUS_PAD, box[3] - box[1] + 2 * FOCUS_PAD));
    // the whole graph rewritten (its root replaced): the root low in the view, the graph above it
    if (scale < READABLE) return this.centre(focus[0], READABLE, focus[0] === this.root ? 0.85 : 0.5);
    this.centreAt((box[0] + box[2]) / 2, (box[1] + box[3]) / 2, scale);
  }

  // Frames the whole graph in the part of the view that the tools and the legend leave free.
  fit() {
    const { width } = this.viewSize();
    const [top, height] = this.free();
    const scale = Math.min(MAX_SCALE, this.fitScale(this.size.width, this.size.height));
    const t = zoomIdentity.translate((width - this.size.width * scale) / 2, top + Math.max(0, (height - this.size.height * scale) / 2));
    this.svg.call(this.zoom.transform, t.scale(scale));
  }

  // The scale at which a w x h part of the graph fills the free part of the view.
  /**
   * @param {number} w
   * @param {number} h
   */
  fitScale(w, h) {
    const { width } = this.viewSize();
    return Math.min(width / w, this.free()[1] / h) * 0.96;
  }

  // The free band of the view: [top, height].
  /** @returns {[number, number]} */
  free() {
    const { height } = this.viewSize();
    const { top, bottom } = this.insets();
    return [top, Math.max(1, height - top - bottom)];
  }

  // Puts `node` in the middle of the free band (or at fraction `at` of its height).
  /**
   * @param {{x: number, y: number}} node
   * @param {number} [scale]
   * @param {number} [at]
   */
  centre(node, scale = this.transform.k, at = 0.5) {
    this.centreAt(node.x, node.y, scale, at);
  }

  /**
   * @param {number} x
   * @param {number} y
   * @param {number} scale
   * @param {number} [at]
   */
  centreAt(x, y, scale, at = 0.5) {
    const { width } = this.viewSize();
    const [top, height] = this.free();
    this.svg.call(this.zoom.transform, zoomIdentity.translate(width / 2 - x * scale, top + height * at - y * scale).scale(scale));
  }

  // Marks every node that stands for node `ref` as selected and, when asked, brings the first one into view.
  /**
   * @param {string | null} ref
   * @param {boolean} reveal
   */
  select(ref, reveal) {
    this.selected = ref;
    for (const [i, el] of this.nodeEls) el.classList.toggle("uv-selected", ref != null && this.nodes[i].refs.includes(ref));
    const node = reveal && ref != null && this.nodes.find((n) => n.refs.includes(ref));
    if (node) this.centre(node, Math.max(this.transform.k, READABLE));
  }

  // Marks the drawn nodes of these indices as found by a search.
  /** @param {number[]} matches */
  search(matches) {
    this.found = new Set(matches);
    for (const [i, el] of this.nodeEls) el.classList.toggle("uv-found", this.found.has(i));
    this.minimap.mark(this.nodes, this.found);
  }

  // Brings drawn node `index` to the middle of the view at a readable scale.
  /** @param {number} index */
  reveal(index) {
    const n = this.nodes[index];
    if (n) this.centre(n, Math.max(this.transform.k, READABLE));
  }
}

// The whole graph in a corner: nodes as their colours, the view as a frame, search hits as white dots.
class Minimap {
  /**
   * @param {HTMLElement} container
   * @param {(x: number, y: number) => void} moveTo
   */
  constructor(container, moveTo) {
    this.canvas = document.createElement("canvas");
    this.canvas.className = "uv-minimap";
    this.canvas.hidden = true;
    this.canvas.title = "the whole graph: click or drag to move the view";
    container.append(this.canvas);
    this.ctx = /** @type {CanvasRenderingContext2D} */ (this.canvas.getContext("2d"));
    /** @type {ImageData | null} */
    this.base = null; // the drawn nodes, kept to repaint under the view frame
    /** @type {{x: number, y: number}[]} */
    this.hits = [];
    /** @type {[Box, {width: number, height: number}] | null} */
    this.last = null;
    this.moveTo = moveTo;
    this.scale = 1;
    /** @param {PointerEvent} e */
    const go = (e) => this.moveTo(e.offsetX / this.scale, e.offsetY / this.scale);
    this.canvas.addEventListener("pointerdown", (e) => {
      this.canvas.setPointerCapture(e.pointerId);
      go(e);
      /** @param {PointerEvent} m */
      const move = (m) => go(m);
      this.canvas.addEventListener("pointermove", move);
      this.canvas.addEventListener("pointerup", () => this.canvas.removeEventListener("pointermove", move), { once: true });
    });
  }

  /**
   * @param {PlacedNode[]} nodes
   * @param {{width: number, height: number}} size
   * @param {number} viewWidth
   */
  draw(nodes, size, viewWidth) {
    const most = Math.min(MINIMAP.width, viewWidth * MINIMAP.share);
    const scale = Math.min(most / size.width, (most * MINIMAP.height) / MINIMAP.width / size.height);
    this.scale = Number.isFinite(scale) && scale > 0 ? scale : 1; // an empty graph (0 x 0) or no room in the view
    this.canvas.width = Math.max(1, Math.round(size.width * this.scale));
    this.canvas.height = Math.max(1, Math.round(size.height * this.scale));
    const ctx = this.ctx;
    ctx.fillStyle = "rgba(20, 22, 27, 0.9)";
    ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    for (const n of nodes) {
      ctx.fillStyle = n.status === "added" ? "#00e676" : n.status === "removed" ? "#ff5370" : n.fill;
      const [x0, y0, x1, y1] = n.box.map((v) => v * this.scale);
      ctx.fillRect(x0, y0, Math.max(1.5, x1 - x0), Math.max(1.5, y1 - y0));
    }
    this.base = ctx.getImageData(0, 0, this.canvas.width, this.canvas.height);
    this.hits = [];
  }

  /**
   * @param {PlacedNode[]} nodes
   * @param {Set<number>} found
   */
  mark(nodes, found) {
    this.hits = [...found].map((i) => nodes[i]);
    if (this.last) this.view(...this.last);
  }

  // Repaints the view's frame; hidden while the view holds the whole graph.
  /**
   * @param {Box} rect
   * @param {{width: number, height: number}} size
   */
  view(rect, size) {
    this.last = [rect, size];
    const whole = rect[0] <= 0 && rect[1] <= 0 && rect[2] >= size.width && rect[3] >= size.height;
    this.canvas.hidden = whole || !this.base;
    if (this.canvas.hidden) return;
    const ctx = this.ctx;
    ctx.putImageData(/** @type {ImageData} */ (this.base), 0, 0);
    ctx.fillStyle = "#fff";
    for (const n of this.hits ?? []) ctx.fillRect(n.x * this.scale - 2, n.y * this.scale - 2, 4, 4);
    ctx.strokeStyle = "#4fa3ff";
    ctx.lineWidth = 1.5;
    const [x0, y0, x1, y1] = rect.map((v) => v * this.scale);
    ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
  }
}

/** @param {PlacedEdge} edge */
function edgeElement(edge) {
  const kind = edge.status ?? "plain";
  const path = svgEl("path", {
    d: curve(edge.points),
    class: `uv-edge${edge.status ? ` uv-${edge.status}` : ""}${edge.bridged ? " uv-bridged" : ""}`,
    "marker-end": `url(#uv-arrow-${kind})`,
  });
  if (edge.operand == null) return path;
  // the operand number, beside the edge just before its arrow
  const p = edge.points;
  const n = p.length;
  const [x1, y1, x0, y0] = [p[n - 2], p[n - 1], p[n - 4], p[n - 3]];
  const len = Math.hypot(x1 - x0, y1 - y0) || 1;
  const [dx, dy] = [(x1 - x0) / len, (y1 - y0) / len];
  const g = svgEl("g", { class: "uv-edge-group" });
  const label = svgEl("text", { class: "uv-operand", x: x1 - dx * 14 + dy * 7, y: y1 - dy * 14 - dx * 7 + 3 });
  label.textContent = edge.operand;
  g.append(path, label);
  return g;
}

/** @type {(a: Box, b: Box) => boolean} */
const meets = (a, b) => a[2] >= b[0] && a[0] <= b[2] && a[3] >= b[1] && a[1] <= b[3];

/**
 * @param {number[]} p
 * @returns {Box}
 */
function bounds(p) {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity];
  for (let i = 0; i < p.length; i += 2) {
    x0 = Math.min(x0, p[i]);
    x1 = Math.max(x1, p[i]);
    y0 = Math.min(y0, p[i + 1]);
    y1 = Math.max(y1, p[i + 1]);
  }
  return [x0, y0, x1, y1];
}

// A smooth path through the edge's points [x0, y0, x1, y1, ...].
/** @param {number[]} p */
function curve(p) {
  let d = `M${p[0]},${p[1]}`;
  const n = p.length / 2;
  for (let i = 1; i < n - 1; i++) {
    const [x, y, nx, ny] = [p[2 * i], p[2 * i + 1], p[2 * i + 2], p[2 * i + 3]];
    d += ` Q${x},${y} ${(x + nx) / 2},${(y + ny) / 2}`;
  }
  return `${d} L${p[2 * n - 2]},${p[2 * n - 1]}`;
}
