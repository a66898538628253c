// The Kernel tab: the kernel's name in axis colours, its axes (click one to pick it), a form to apply an
// opt to that axis (the choices the data source's meta offers for the kernel's device), the opts applied so far,
// and the C source or the Linear listing. With opts in the view state it shows the kernel lowered again with
// exactly those opts (the data source records that lowering as a new trace).
import { fill, h, textOn } from "../dom.js";
import { highlight, highlightListing } from "../highlight.js";
import { kernelName } from "../names.js";
import { choicesFor, describeOpt, formatOpts, makeOpt } from "../opts.js";

export const kernelPanel = {
  id: "kernel",
  title: "Kernel",
  create: (el, ctx) => new KernelPanel(el, ctx),
};

class KernelPanel {
  constructor(el, ctx) {
    this.el = el;
    this.ctx = ctx;
    this.axisColors = ctx.axisColors;
    this.opColors = new Map(ctx.meta.op_groups.flatMap((g) => g.ops.map((op) => [op, g.color])));
    this.form = { axis: 0, choice: 0, amount: 4, top: false, other: 1 };
    this.listing = "source";
    this.error = null;
    this.busy = false;
    this.key = null; // trace/context/opts of the kernel shown
  }

  destroy() {}

  async update({ trace, context, state }) {
    const { ci, opts } = state;
    const tid = trace.id;
    const key = `${tid}/${ci}/${opts ? formatOpts(opts) : ""}`;
    if (key === this.key) return;
    const sameKernel = this.key?.startsWith(`${tid}/${ci}/`);
    this.key = key;
    if (context.kind !== "kernel") return this.showMessage(`${context.name} is a ${context.kind} context: pick a kernel to see its source and opts.`);
    if (!sameKernel) this.showMessage("Loading the kernel…");
    let view;
    let error = null;
    try {
      view = await this.ctx.fetch(`kernel/${tid}/${ci}`, () => this.ctx.source.kernel(tid, ci));
      if (opts) view = await this.optsView(tid, ci, opts);
    } catch (err) {
      if (!view) return this.key === key && this.showMessage(err.message, true);
      error = `The opts in this view do not apply: ${err.message}`;
    }
    if (this.key === key) this.show(view, opts !== null && !error, error);
  }

  // The kernel lowered again with exactly `opts`: the data source records that lowering as a new trace whose one
  // context is the new kernel; its kernel view adds the device and the Linear listing to the opts answer.
  optsView(tid, ci, opts) {
    const { source } = this.ctx;
    return this.ctx.fetch(`opts/${tid}/${ci}/${formatOpts(opts)}`, async () => {
      const applied = await source.applyOpts(tid, ci, opts);
      // without it the panel still has the name, source and axes, and says the listing is missing
      const lowered = applied.trace_id == null ? {} : await source.kernel(applied.trace_id, 0).catch(() => ({}));
      return { ...lowered, ...applied };
    });
  }

  // Apply and Undo (a list of opts) and Reset (null: the kernel as compiled). On success the opts go into the
  // view state; an illegal list rejects with the reason.
  async apply(opts) {
    const { tid, ci } = this.ctx.state();
    if (opts) await this.optsView(tid, ci, opts);
    this.ctx.go({ opts }, true);
  }

  openTrace(tid) {
    this.ctx.go({ tid, ci: null, pi: 0, k: 0, opts: null, tab: "rewrite" }, true);
  }

  // A context that is not a kernel (the schedule), or a kernel that could not be loaded.
  showMessage(text, isError) {
    this.view = null;
    fill(this.el, h("p", { class: isError ? "uv-error" : "uv-hint" }, text));
  }

  // view: the kernel as compiled, or lowered again with chosen opts (custom), as the data source returned it;
  // view.opts are the opts behind it and view.axes its axes, which the next opt refers to.
  show(view, custom, error = null) {
    this.view = view;
    this.custom = custom;
    this.error = error;
    if (this.form.axis >= view.axes.length) this.form.axis = 0;
    this.render();
  }

  render() {
    const { view, form } = this;
    const { meta, readOnly } = this.ctx;
    const opts = view.opts;
    const choices = choicesFor(meta, view.device);
    if (form.choice >= choices.length) form.choice = 0;
    const choice = choices[form.choice];
    // On success the app shows the new kernel (show()); on failure the reason shows under the form.
    const submit = async (next) => {
      this.error = null;
      this.busy = true;
      this.render();
      try {
        await this.apply(next);
      } catch (err) {
        this.error = err.message;
      }
      this.busy = false;
      if (this.view) this.render();
    };
    const axisOptions = (selected) => view.axes.map((a, i) => h("option", { value: i, selected: i === selected }, `a${i} ${a.letter}${a.size}`));
    fill(
      this.el,
      h("div", { class: "uv-section-title uv-kernel-title" }, kernelName(view.name, this.axisColors), h("span", { class: "uv-dim" }, view.device ?? "")),
      h("div", { class: "uv-label" }, "Axes ", h("span", { class: "uv-dim" }, "click one to optimize it")),
      h(
        "div",
        { class: "uv-axes" },
        view.axes.map((a, i) =>
          h(
            "button",
            {
              class: `uv-axis${i === form.axis ? " uv-active" : ""}`,
              style: `background:${a.color};color:${textOn(a.color)}`,
              title: `axis ${i}: ${a.type}, size ${a.size}`,
              dataset: { axis: i, type: a.type, size: a.size },
              onclick: () => {
                form.axis = i;
                this.render();
              },
            },
            h("span", { class: "uv-axis-index" }, `a${i}`),
            `${a.letter}${a.size}`,
          ),
        ),
      ),
      !readOnly &&
      h(
        "form",
        {
          class: "uv-opt-form",
          onsubmit: (event) => {
            event.preventDefault();
            submit([...opts, makeOpt(choice, form)]);
          },
        },
        h(
          "select",
          { class: "uv-opt-op", "aria-label": "opt", onchange: (e) => ((form.choice = Number(e.target.value)), this.render()) },
          choices.map((c, i) => h("option", { value: i, selected: i === form.choice, title: c.doc }, c.label)),
        ),
        choice.axis && h("span", { class: "uv-dim" }, `a${form.axis}`),
        choice.amount &&
          h("input", {
            class: "uv-opt-amount",
            type: "number",
            min: 1,
            value: form.amount,
            "aria-label": choice.amount,
            title: choice.doc,
            oninput: (e) => (form.amount = Number(e.target.value)),
          }),
        choice.top &&
          h("label", { class: "uv-opt-top", title: "split as (k, n/k) instead of (n/k, k)" }, h("input", { type: "checkbox", checked: form.top, onchange: (e) => (form.top = e.target.checked) }), "top"),
        choice.other_axis && ["with ", h("select", { class: "uv-opt-other", onchange: (e) => (form.other = Number(e.target.value)) }, axisOptions(form.other))],
        h("button", { class: "uv-button uv-primary uv-opt-apply", type: "submit", disabled: this.busy }, "Apply"),
      ),
      this.error && h("div", { class: "uv-error uv-opt-error" }, this.error),
      h(
        "div",
        { class: "uv-applied" },
        h("span", { class: "uv-label" }, this.custom ? "Opts" : "Opts as compiled"),
        opts.length ? opts.map((o) => h("span", { class: "uv-chip uv-opt-chip" }, describeOpt(meta, o))) : h("span", { class: "uv-dim" }, "none"),
        !readOnly && opts.length > 0 && h("button", { class: "uv-button uv-opt-undo", title: "lower the kernel without the last opt", onclick: () => submit(opts.slice(0, -1)) }, "Undo"),
        !readOnly && this.custom && h("button", { class: "uv-button uv-opt-reset", title: "back to the kernel as compiled", onclick: () => submit(null) }, "Reset"),
      ),
      view.trace_id &&
        h(
          "p",
          { class: "uv-hint" },
          "Lowered again with these opts: ",
          h("button", { class: "uv-button uv-open-trace", onclick: () => this.openTrace(view.trace_id) }, "see its rewrites"),
        ),
      h(
        "div",
        { class: "uv-subtabs" },
        ["source", "linear"].map((kind) =>
          h("button", { class: `uv-subtab${this.listing === kind ? " uv-active" : ""}`, onclick: () => ((this.listing = kind), this.render()) }, kind === "source" ? "Source" : "Linear"),
        ),
      ),
      this.code(),
    );
  }

  code() {
    const { view } = this;
    const pre = h("pre", { class: `uv-code uv-kernel-${this.listing}` });
    if (this.listing === "source") {
      if (view.source) pre.innerHTML = highlight(view.source, "c");
      else pre.textContent = "This device runs the Linear program directly: there is no source.";
    } else if (view.linear) pre.innerHTML = highlightListing(view.linear, (op) => this.opColors.get(op));
    else pre.textContent = "No Linear listing was returned for these opts.";
    return pre;
  }
}
