// Draws a laid-out display graph as SVG: pan and zoom (d3-zoom), nodes coloured by op group (Range nodes by
// AxisType), what the step added outlined, what it removed dashed and faded; a click selects a node.
// Only what lies in and around the view is in the DOM: elements are added a slice per animation frame as
// the view moves and dropped when far outside it, so a graph of thousands of nodes stays light to draw,
// pan and zoom, and the page keeps answering while it appears.

import { select } from "d3-selection";
import { zoom, zoomIdentity } from "d3-zoom";

const SVG_NS = "http://www.w3.org/2000/svg";
const SLICE = 250; // nodes (and as many edges) added per frame
const NEAR = 0.5; // draw what lies within half a view of the view...
const FAR = 1.5; // ...and drop what lies more than one and a half views away
const MIN_FIT_SCALE = 0.3; // below this a whole-graph view is unreadable: frame a part of it instead
const START_SCALE = 0.8;
const INSET_TOP = 44; // the graph tools above...
const INSET_BOTTOM = 84; // ...and the legend below

const svgEl = (tag, attrs) => {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
};

export class GraphView {
  constructor(container, onSelect) {
    this.svg = select(container).append("svg").attr("class", "uv-graph-svg");
    const defs = this.svg.append("defs");
    for (const kind of ["plain", "added", "removed"]) {
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
    this.edgeLayer = this.viewport.append("g").attr("class", "uv-edges").node();
    this.nodeLayer = this.viewport.append("g").attr("class", "uv-nodes").node();
    this.transform = zoomIdentity;
    this.zoom = zoom()
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
    this.nodes = [];
    this.edges = [];
    this.nodeEls = new Map(); // index -> element, for the nodes now in the DOM
    this.edgeEls = new Map();
    this.size = { width: 0, height: 0 };
    this.selected = null;
    this.userMoved = false;
    this.fillPending = false;
    this.waiters = [];
  }

  // Draws `display` at the positions of `layout`. fit: a new pass, framed anew; within a pass each step is
  // framed the same way until the person pans or zooms, and from then on their view is kept unless what the
  // step changed is out of sight. Resolves once the view is drawn: true, or false when a newer draw came first.
  draw(display, layout, fit) {
    this.settle(false);
    this.size = { width: layout.width, height: layout.height };
    this.nodes = display.nodes.map((n, i) => {
      const [x, y] = layout.nodes[i];
      return { ...n, x, y, box: [x - n.width / 2, y - n.height / 2, x + n.width / 2, y + n.height / 2] };
    });
    this.edges = display.edges.flatMap((e, i) => (e.hidden ? [] : [{ ...e, points: layout.edges[i], box: bounds(layout.edges[i]) }]));
    this.special = new Map([
      [display.match, "uv-match"],
      [display.replacement, "uv-replacement"],
    ]);
    this.nodeEls.clear();
    this.edgeEls.clear();
    this.edgeLayer.replaceChildren();
    this.nodeLayer.replaceChildren();
    this.svg.attr("data-key", null).attr("data-nodes", null);
    this.root = this.nodes.find((n) => n.ref === display.root);
    const changed = this.nodes.filter((n) => n.status);
    const view = this.viewRect(0);
    if (fit) this.userMoved = false;
    if (!this.userMoved) this.frame(changed[0]);
    else if (changed.length && !changed.some((n) => meets(n.box, view))) this.centre(changed[0]);
    const done = new Promise((resolve) => this.waiters.push(resolve));
    this.scheduleFill();
    return done.then((complete) => {
      if (complete) this.svg.attr("data-key", display.key).attr("data-nodes", this.nodes.length);
      return complete;
    });
  }

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
    for (const [els, items] of [
      [this.nodeEls, this.nodes],
      [this.edgeEls, this.edges],
    ]) {
      for (const [i, el] of els) {
        if (!meets(items[i].box, far)) {
          el.remove();
          els.delete(i);
        }
      }
    }
    const near = this.viewRect(NEAR);
    const more = this.add(this.edges, this.edgeEls, this.edgeLayer, near, (e) => edgeElement(e)) | this.add(this.nodes, this.nodeEls, this.nodeLayer, near, (n, i) => this.nodeElement(n, i));
    if (more) this.scheduleFill();
    else this.settle(true);
  }

  // Adds up to SLICE missing elements of `items` that meet `rect`; says whether more remain.
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
  viewRect(margin) {
    const { width, height } = this.viewSize();
    const t = this.transform;
    const [x0, y0, x1, y1] = [-t.x / t.k, -t.y / t.k, (width - t.x) / t.k, (height - t.y) / t.k];
    const [mx, my] = [(x1 - x0) * margin, (y1 - y0) * margin];
    return [x0 - mx, y0 - my, x1 + mx, y1 + my];
  }

  viewSize() {
    return this.svg.node().getBoundingClientRect();
  }

  nodeElement(d, index) {
    const cls = ["uv-node", d.hub && "uv-hub", d.status && `uv-${d.status}`, this.special.get(d.ref), d.ref === this.selected && "uv-selected"];
    const g = svgEl("g", {
      class: cls.filter(Boolean).join(" "),
      transform: `translate(${d.box[0]},${d.box[1]})`,
      "data-index": index,
      "data-ref": d.ref,
      "data-op": d.op,
    });
    if (d.axisType) g.setAttribute("data-axis-type", d.axisType);
    g.append(svgEl("rect", { width: d.width, height: d.height, rx: d.hub ? d.height / 2 : 4, fill: d.fill }));
    const title = svgEl("text", { class: "uv-node-title", x: d.width / 2, y: d.sub ? 14 : 15, fill: d.ink });
    title.textContent = d.title;
    g.append(title);
    if (d.sub) {
      const sub = svgEl("text", { class: "uv-node-sub", x: d.width / 2, y: 27, fill: d.ink });
      sub.textContent = d.sub;
      g.append(sub);
    }
    return g;
  }

  // The first view of a graph: all of it, or when that would be unreadably small, `focus` (what the step
  // changed) in the middle, else the root near the bottom, at a readable scale.
  frame(focus) {
    if (!this.viewSize().width || !this.size.width) return;
    if (this.fitScale() >= MIN_FIT_SCALE) return this.fit();
    if (focus) this.centre(focus, START_SCALE);
    else if (this.root) this.centre(this.root, START_SCALE, 0.9);
  }

  // Frames the whole graph in the part of the view that the tools and the legend leave free.
  fit() {
    const { width } = this.viewSize();
    const [top, height] = this.free();
    const scale = this.fitScale();
    const t = zoomIdentity.translate((width - this.size.width * scale) / 2, top + Math.max(0, (height - this.size.height * scale) / 2));
    this.svg.call(this.zoom.transform, t.scale(scale));
  }

  fitScale() {
    const { width } = this.viewSize();
    return Math.min(width / this.size.width, this.free()[1] / this.size.height, 1.25) * 0.96;
  }

  // The free band of the view: [top, height].
  free() {
    const { height } = this.viewSize();
    return [INSET_TOP, Math.max(1, height - INSET_TOP - INSET_BOTTOM)];
  }

  // Puts `node` in the middle of the free band (or at fraction `at` of its height).
  centre(node, scale = this.transform.k, at = 0.5) {
    const { width } = this.viewSize();
    const [top, height] = this.free();
    this.svg.call(this.zoom.transform, zoomIdentity.translate(width / 2 - node.x * scale, top + height * at - node.y * scale).scale(scale));
  }

  // Marks every copy of node `ref` as selected and, when asked, brings the first one into view.
  select(ref, reveal) {
    this.selected = ref;
    for (const el of this.nodeEls.values()) el.classList.toggle("uv-selected", el.dataset.ref === ref);
    const node = reveal && ref != null && this.nodes.find((n) => n.ref === ref);
    if (node) this.centre(node);
  }
}

function edgeElement(edge) {
  return svgEl("path", {
    d: curve(edge.points),
    class: `uv-edge${edge.status ? ` uv-${edge.status}` : ""}`,
    "marker-end": `url(#uv-arrow-${edge.status ?? "plain"})`,
  });
}

const meets = (a, b) => a[2] >= b[0] && a[0] <= b[2] && a[3] >= b[1] && a[1] <= b[3];

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
function curve(p) {
  let d = `M${p[0]},${p[1]}`;
  const n = p.length / 2;
  for (let i = 1; i < n - 1; i++) {
    const [x, y, nx, ny] = [p[2 * i], p[2 * i + 1], p[2 * i + 2], p[2 * i + 3]];
    d += ` Q${x},${y} ${(x + nx) / 2},${(y + ny) / 2}`;
  }
  return `${d} L${p[2 * n - 2]},${p[2 * n - 1]}`;
}
