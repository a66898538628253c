// Opts as the data source describes them: meta.opts lists every opt a person may pick (one definition, in
// uopviz/codegen/opt, served by /api/meta), meta.device_opts the labels each device takes at all. Nothing here
// names an OptOp: building, describing and writing opts all follow those choices.
//
// An opt is {op, axis, arg}. A choice with split_to makes arg [amount, split_to, top]; one with an amount makes
// arg that number; one with other_axis makes arg the other axis; else arg is null (and axis too without axis).
/** @import { Meta, Opt, OptChoice, SplitArg } from "../types/api" */

// The choices a kernel on `device` may take; for a device this server does not run (a trace recorded elsewhere),
// those every device here takes, so that no opt is offered that a device cannot take (LOCAL on a CPU).
/**
 * @param {Meta} meta
 * @param {string | null | undefined} device
 * @returns {OptChoice[]}
 */
export function choicesFor(meta, device) {
  const perDevice = Object.values(meta.device_opts ?? {});
  const labels = meta.device_opts?.[/** @type {string} */ (device)] ?? (perDevice.length ? meta.opts.map((c) => c.label).filter((l) => perDevice.every((d) => d.includes(l))) : null);
  return labels ? meta.opts.filter((c) => labels.includes(c.label)) : meta.opts;
}

// The choice an opt was made from.
/**
 * @param {Meta} meta
 * @param {Opt} o
 */
export function choiceOf(meta, o) {
  return meta.opts.find((c) => c.op === o.op && (!c.split_to || (Array.isArray(o.arg) && c.split_to === o.arg[1])));
}

// The opt a choice makes from the form's values {axis, amount, top, other}.
/**
 * @param {OptChoice} choice
 * @param {{axis: number, amount: number, top: boolean, other: number}} form
 * @returns {Opt}
 */
export function makeOpt(choice, { axis, amount, top, other }) {
  /** @type {Opt["arg"]} */
  let arg = null;
  if (choice.split_to) arg = [amount, choice.split_to, Boolean(top)];
  else if (choice.amount) arg = amount;
  else if (choice.other_axis) arg = other;
  return { op: choice.op, axis: choice.axis ? axis : null, arg };
}

// Short text of an opt: "UPCAST a1 ×4 top", "PADTO a0 multiple 32", "SWAP a0 ↔ a2".
/**
 * @param {Meta} meta
 * @param {Opt} o
 */
export function describeOpt(meta, o) {
  const c = choiceOf(meta, o);
  if (!c) return `${o.op}${o.axis != null ? ` a${o.axis}` : ""}${o.arg != null ? ` ${JSON.stringify(o.arg)}` : ""}`;
  const parts = [c.label];
  if (c.axis) parts.push(`a${o.axis}`);
  if (c.split_to) parts.push(`×${/** @type {SplitArg} */ (o.arg)[0]}${/** @type {SplitArg} */ (o.arg)[2] ? " top" : ""}`); // choiceOf: an array
  else if (c.amount) parts.push(`${c.amount} ${o.arg}`);
  else if (c.other_axis) parts.push(`↔ a${o.arg}`);
  return parts.join(" ");
}

/**
 * @param {Meta} meta
 * @param {Opt[] | null | undefined} opts
 */
export function describeOpts(meta, opts) {
  return Array.isArray(opts) && opts.length ? opts.map((o) => describeOpt(meta, o)).join(", ") : "no opts";
}

// The opts in a URL: OP[:axis[:arg...]] joined by ","; "-" for none. SPLIT:0:4:UPCAST:0 (top as 0/1), PADTO:1:32.
/** @param {Opt[]} opts */
export function formatOpts(opts) {
  if (!opts.length) return "-";
  /** @type {(v: unknown) => unknown} */
  const flat = (v) => (Array.isArray(v) ? v.map(flat) : typeof v === "boolean" ? Number(v) : v);
  return opts.map((o) => [o.op, ...(o.axis != null ? [o.axis] : []), ...(o.arg != null ? [flat(o.arg)].flat() : [])].join(":")).join(",");
}

// The opts formatOpts wrote, read back by their choices; throws on text that names no choice or is malformed.
/**
 * @param {Meta} meta
 * @param {string} text
 * @returns {Opt[]}
 */
export function parseOpts(meta, text) {
  if (text === "-") return [];
  return text.split(",").map((part) => {
    const [op, ...rest] = part.split(":");
    const choice = meta.opts.find((c) => c.op === op && (!c.split_to || c.split_to === rest[2]));
    /** @param {string | undefined} s */
    const int = (s) => {
      if (!/^\d+$/.test(s ?? "")) throw new Error(`bad opt ${part}`);
      return Number(s);
    };
    if (!choice) throw new Error(`bad opt ${part}`);
    const axis = choice.axis ? int(rest[0]) : null;
    const args = choice.axis ? rest.slice(1) : rest;
    if (choice.split_to) return { op, axis, arg: [int(args[0]), choice.split_to, args[2] === "1"] };
    if (choice.amount || choice.other_axis) return { op, axis, arg: int(args[0]) };
    return { op, axis, arg: null };
  });
}
