// Data the unit tests share: a data source's meta as /api/meta serves it (its opts those of uopviz/codegen/opt) and
// builders of graph nodes and steps in the shape of the API's answers (types/api.d.ts).
/** @import { GraphNode, Meta, OptChoice, StepView } from "../types/api" */

/** @type {(label: string) => OptChoice} */
const split = (label) => ({ label, op: "SPLIT", split_to: label, axis: true, amount: "factor", other_axis: false, top: true, doc: `split into ${label}` });

/** @type {Meta} */
export const META = {
  version: "test",
  axis_types: [
    { name: "GLOBAL", letter: "g", color: "#0000ff" },
    { name: "LOCAL", letter: "l", color: "#00ffff" },
    { name: "REDUCE", letter: "R", color: "#ff0000" },
    { name: "UPCAST", letter: "u", color: "#ffff00" },
  ],
  op_groups: [
    { name: "alu", color: "#112233", ops: ["Add", "Mul"] },
    { name: "memory", color: "#445566", ops: ["Load", "Store", "Index"] },
  ],
  other_color: "#777777",
  devices: ["CPU", "CL"],
  default_device: "CPU",
  opts: [
    split("UPCAST"),
    split("LOCAL"),
    split("UNROLL"),
    { label: "PADTO", op: "PADTO", split_to: null, axis: true, amount: "multiple", other_axis: false, top: false, doc: "pad" },
    { label: "SWAP", op: "SWAP", split_to: null, axis: true, amount: null, other_axis: true, top: false, doc: "swap" },
    { label: "NOLOCALS", op: "NOLOCALS", split_to: null, axis: false, amount: null, other_axis: false, top: false, doc: "no locals" },
  ],
  device_opts: {
    CPU: ["UPCAST", "UNROLL", "PADTO", "SWAP", "NOLOCALS"],
    CL: ["UPCAST", "LOCAL", "UNROLL", "PADTO", "SWAP", "NOLOCALS"],
  },
  commutative: ["Add", "Mul"],
};

/**
 * A graph node: op and sources, the rest as given (or the defaults: an index-typed scalar of no group).
 * @param {string} id
 * @param {string} op
 * @param {string[]} [src]
 * @param {Partial<GraphNode>} [rest]
 * @returns {GraphNode}
 */
export function node(id, op, src = [], rest = {}) {
  return { id, op, dtype: "index", arg: "", src, shape: [], group: null, axis_type: null, color: "#808080", ...rest };
}

/**
 * A step's answer: its nodes (the root the first), and what the step changed.
 * @param {GraphNode[]} nodes
 * @param {Partial<StepView>} [rest]
 * @returns {StepView}
 */
export function step(nodes, rest = {}) {
  return { root: nodes[0].id, steps: 1, nodes, added: [], removed: [], rebuilt: [], rule: null, match: null, replacement: null, changes: [], changed: 0, folded: [], summary: [], ...rest };
}

// A widget model as anywidget gives the JS side: traitlets, messages, listeners.
export class FakeModel {
  /** @param {Record<string, unknown>} traits */
  constructor(traits = {}) {
    this.traits = { ...traits };
    /** @type {unknown[]} */
    this.sent = [];
    this.saves = 0;
    /** @type {Map<string, Set<(...args: any[]) => void>>} */
    this.handlers = new Map();
  }
  /** @param {string} name */
  get(name) {
    return this.traits[name];
  }
  /** The view changed a traitlet (Backbone tells its listeners at once). @param {string} name @param {unknown} value */
  set(name, value) {
    this.traits[name] = value;
    this.emit(`change:${name}`);
  }
  save_changes() {
    this.saves++;
  }
  /** @param {unknown} msg */
  send(msg) {
    this.sent.push(msg);
  }
  /** @param {string} event @param {(...args: any[]) => void} fn */
  on(event, fn) {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event)?.add(fn);
  }
  /** @param {string} event @param {(...args: any[]) => void} fn */
  off(event, fn) {
    this.handlers.get(event)?.delete(fn);
  }
  /** @param {string} event @param {...unknown} args */
  emit(event, ...args) {
    for (const fn of this.handlers.get(event) ?? []) fn(...args);
  }
  /** Python changed a traitlet. @param {string} name @param {unknown} value */
  pythonSets(name, value) {
    this.set(name, value);
  }
}
