// The BEAM tab: where a kernel's BEAM searches are plotted (candidate times per round, the winning path)
// once the data source serves tuning results; until then it says that none is available.
import { fill, h } from "../dom.js";

export function renderBeam(el, ctx) {
  fill(
    el,
    h("div", { class: "uv-section-title" }, "BEAM search"),
    h(
      "p",
      { class: "uv-hint" },
      ctx.kind === "kernel"
        ? "No BEAM search of this kernel is available from this server. Searches appear here as candidate times per round, with the winning path of opts."
        : "BEAM searches are per kernel: pick a kernel context.",
    ),
  );
}
