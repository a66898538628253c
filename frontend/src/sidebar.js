// The sidebar: traces; the open trace's contexts (kernels named in coloured axis letters); the open
// context's passes, grouped by stage and indented by nesting depth, each with its number of matches.
import { fill, h } from "./dom.js";
import { kernelName } from "./names.js";

export class Sidebar {
  constructor(el, axisColors, go) {
    this.el = el;
    this.axisColors = axisColors;
    this.go = go;
  }

  render(traces, trace, state) {
    fill(
      this.el,
      h("div", { class: "uv-side-head" }, "Traces"),
      traces.map((t) => {
        const open = t.id === state.tid;
        return [
          h(
            "button",
            { class: `uv-trace${open ? " uv-active" : ""}`, dataset: { tid: t.id }, title: `${t.id} (${t.source})`, onclick: () => this.go({ tid: t.id, ci: null, pi: 0, k: 0, opts: null, search: null }, true) },
            h("span", { class: "uv-trace-name" }, t.source === "opts" ? kernelName(t.name, this.axisColors) : t.name),
            h("span", { class: "uv-count" }, `${t.contexts}`),
          ),
          open && trace && this.contexts(trace, state),
        ];
      }),
    );
    this.reveal(this.el.querySelector(".uv-pass.uv-active"));
  }

  // Scrolls the sidebar (and nothing around it, such as a notebook) so that `row` is in sight.
  reveal(row) {
    if (!row) return;
    const { scrollTop, clientHeight } = this.el;
    const [top, bottom] = [row.offsetTop, row.offsetTop + row.offsetHeight];
    if (top < scrollTop) this.el.scrollTop = top - 40;
    else if (bottom > scrollTop + clientHeight) this.el.scrollTop = bottom - clientHeight + 40;
  }

  contexts(trace, state) {
    return h(
      "div",
      { class: "uv-ctxs" },
      trace.contexts.map((c) => {
        const open = c.index === state.ci;
        return [
          h(
            "button",
            { class: `uv-ctx${open ? " uv-active" : ""}`, dataset: { ci: c.index, name: c.name, kind: c.kind }, onclick: () => this.go({ ci: c.index, pi: 0, k: 0, opts: null, search: null }, true) },
            c.kind === "kernel" ? kernelName(c.name, this.axisColors) : h("span", { class: "uv-kname" }, c.name),
            h("span", { class: "uv-kind" }, c.kind),
          ),
          open && this.passes(c, state),
        ];
      }),
    );
  }

  passes(ctx, state) {
    const rows = [];
    let stage;
    for (const p of ctx.passes) {
      if (p.depth === 0 && p.stage !== stage) {
        stage = p.stage;
        rows.push(h("div", { class: "uv-stage" }, stage ?? "no stage"));
      }
      rows.push(
        h(
          "button",
          {
            class: `uv-pass${p.index === state.pi ? " uv-active" : ""}${p.error ? " uv-failed" : ""}`,
            dataset: { pi: p.index },
            style: `padding-left:${22 + 12 * p.depth}px`,
            title: p.error ?? `${p.name}: ${p.steps} matches`,
            onclick: () => this.go({ pi: p.index, k: 0 }, true),
          },
          h("span", { class: "uv-pass-name" }, p.name),
          p.error && h("span", { class: "uv-error-mark" }, "!"),
          h("span", { class: `uv-count${p.steps ? "" : " uv-zero"}` }, `${p.steps}`),
        ),
      );
    }
    return h("div", { class: "uv-passes" }, rows);
  }
}
