// The Kernel tab: the kernel's name in axis colours, its axes (click one to pick it), a form to apply an
// OptOp to that axis, the opts applied so far, and the C source or the Linear listing.
import { fill, h, textOn } from "../dom.js";
import { highlight, highlightListing } from "../highlight.js";
import { kernelName } from "../names.js";

// The ops a person picks; the split ones become SPLIT opts with that target AxisType.
const CHOICES = [
  { label: "UPCAST", split: "UPCAST" },
  { label: "UNROLL", split: "UNROLL" },
  { label: "LOCAL", split: "LOCAL" },
  { label: "GROUP_REDUCE", split: "GROUP_REDUCE" },
  { label: "THREAD", split: "THREAD" },
  { label: "PADTO", op: "PADTO" },
  { label: "SWAP", op: "SWAP" },
  { label: "NOLOCALS", op: "NOLOCALS" },
];

export function describeOpt(o) {
  if (o.op === "SPLIT") return `${o.arg[1]} a${o.axis} ×${o.arg[0]}${o.arg[2] ? " top" : ""}`;
  if (o.op === "PADTO") return `PADTO a${o.axis} to ${o.arg}`;
  if (o.op === "SWAP") return `SWAP a${o.axis} ↔ a${o.arg}`;
  return o.op;
}

export class KernelPanel {
  // apply(opts) asks for the kernel lowered with exactly these opts (null: as compiled); it rejects with the
  // reason when they are illegal.
  // openTrace(id) shows the trace of the kernel's lowering with opts (the server records one per opt set).
  constructor(el, meta, axisColors, apply, openTrace) {
    this.el = el;
    this.axisColors = axisColors;
    this.apply = apply;
    this.openTrace = openTrace;
    this.opColors = new Map(meta.op_groups.flatMap((g) => g.ops.map((op) => [op, g.color])));
    this.form = { axis: 0, choice: 0, amount: 4, top: false, other: 1 };
    this.listing = "source";
    this.error = null;
    this.busy = false;
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
    const opts = view.opts;
    const choice = CHOICES[form.choice];
    const needsAmount = choice.split || choice.op === "PADTO";
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
      h(
        "form",
        {
          class: "uv-opt-form",
          onsubmit: (event) => {
            event.preventDefault();
            submit([...opts, this.opt()]);
          },
        },
        h(
          "select",
          { class: "uv-opt-op", "aria-label": "opt", onchange: (e) => ((form.choice = Number(e.target.value)), this.render()) },
          CHOICES.map((c, i) => h("option", { value: i, selected: i === form.choice }, c.label)),
        ),
        choice.op !== "NOLOCALS" && h("span", { class: "uv-dim" }, `a${form.axis}`),
        needsAmount &&
          h("input", {
            class: "uv-opt-amount",
            type: "number",
            min: 1,
            value: form.amount,
            "aria-label": choice.split ? "factor" : "multiple",
            title: choice.split ? "split factor" : "pad to a multiple of",
            oninput: (e) => (form.amount = Number(e.target.value)),
          }),
        choice.split &&
          h("label", { class: "uv-opt-top", title: "split as (k, n/k) instead of (n/k, k)" }, h("input", { type: "checkbox", checked: form.top, onchange: (e) => (form.top = e.target.checked) }), "top"),
        choice.op === "SWAP" && ["with ", h("select", { class: "uv-opt-other", onchange: (e) => (form.other = Number(e.target.value)) }, axisOptions(form.other))],
        h("button", { class: "uv-button uv-primary uv-opt-apply", type: "submit", disabled: this.busy }, "Apply"),
      ),
      this.error && h("div", { class: "uv-error uv-opt-error" }, this.error),
      h(
        "div",
        { class: "uv-applied" },
        h("span", { class: "uv-label" }, this.custom ? "Opts" : "Opts as compiled"),
        opts.length ? opts.map((o) => h("span", { class: "uv-chip uv-opt-chip" }, describeOpt(o))) : h("span", { class: "uv-dim" }, "none"),
        opts.length > 0 && h("button", { class: "uv-button uv-opt-undo", title: "lower the kernel without the last opt", onclick: () => submit(opts.slice(0, -1)) }, "Undo"),
        this.custom && h("button", { class: "uv-button uv-opt-reset", title: "back to the kernel as compiled", onclick: () => submit(null) }, "Reset"),
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

  opt() {
    const { form } = this;
    const choice = CHOICES[form.choice];
    if (choice.split) return { op: "SPLIT", axis: form.axis, arg: [form.amount, choice.split, form.top] };
    if (choice.op === "PADTO") return { op: "PADTO", axis: form.axis, arg: form.amount };
    if (choice.op === "SWAP") return { op: "SWAP", axis: form.axis, arg: form.other };
    return { op: "NOLOCALS", axis: null, arg: null };
  }
}
