// A node's provenance as one line: the Tensor op (without "Tensor.") and the user's line that made it ("softmax at model.py:42"), and
// for a node of a gradient the forward op it differentiates ("gradient of softmax at model.py:42"). The file is
// named by its last part (a notebook cell keeps its name, "Cell In[3]").
/** @import { NodeOrigin } from "../../types/api" */

/** @param {string} file */
export const shortFile = (file) => file.split(/[\\/]/).pop() || file;

/** @param {NodeOrigin} o */
const at = (o) => `${o.op.replace(/^Tensor\./, "")} at ${shortFile(o.file)}:${o.line}`;

/**
 * @param {NodeOrigin | null | undefined} origin
 * @returns {string} "" where the trace does not say
 */
export function originText(origin) {
  if (!origin) return "";
  return origin.grad_of ? `gradient of ${at(origin.grad_of)}` : at(origin);
}

/**
 * The frame as a tooltip: the whole path, the function and the line of code.
 * @param {NodeOrigin | null | undefined} origin
 */
export function originTitle(origin) {
  if (!origin) return "";
  /** @param {NodeOrigin} o */
  const frame = (o) => `${o.file}:${o.line} in ${o.function}${o.code ? `\n  ${o.code.trim()}` : ""}`;
  return origin.grad_of ? `${frame(origin)}\ngradient of:\n${frame(origin.grad_of)}` : frame(origin);
}
