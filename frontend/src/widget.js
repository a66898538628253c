// The Jupyter widget's side (anywidget: https://anywidget.dev): the app over the widget's comm, and the view state
// kept in step with the Python traitlets trace, context, pass_index, step and opts, both ways.
//
// A request goes to the kernel as {request: id, method, args}; the kernel answers {response: id, ok: answer} or
// {response: id, error: {status, detail}}. A BEAM job is followed with {follow: id, job}; its events come back as
// {events: id, items: [...]}, and {unfollow: id} stops them.
import { DataError } from "./data.js";
import { renderBeamLive } from "./panels/beam-live.js";
import { ROUTES } from "./routes.js";
/** @import { DataSource } from "../types/api" */
/** @import { ViewState, WidgetModel } from "../types/ui" */
/** @typedef {"tid" | "ci" | "pi" | "k" | "opts" | "tab"} TraitKey */

/** @type {Record<TraitKey, string>} */
const TRAITS = { tid: "trace", ci: "context", pi: "pass_index", k: "step", opts: "opts", tab: "tab" };
/** @type {Record<string, string | number>} */
const NONE = { tid: "", ci: -1 }; // how the traitlets spell "none chosen yet" (opts: null, the kernel as compiled)
/** @type {(key: string, value: unknown) => unknown} */
const toTrait = (key, value) => value ?? NONE[key] ?? null;
/** @type {(key: string, value: unknown) => unknown} */
const fromTrait = (key, value) => (value === NONE[key] ? null : value);

/**
 * @param {WidgetModel} model
 * @returns {DataSource & {close(): void}}
 */
export function commSource(model) {
  let next = 0;
  /** @type {Map<number, {resolve: (value: any) => void, reject: (reason: unknown) => void}>} */
  const pending = new Map(); // request id -> {resolve, reject}
  /** @type {Map<number, (event: any) => void>} */
  const followers = new Map(); // follow id -> onEvent
  /** @param {any} msg */
  const onMessage = (msg) => {
    if (msg.response != null && pending.has(msg.response)) {
      const { resolve, reject } = /** @type {{resolve: (value: any) => void, reject: (reason: unknown) => void}} */ (pending.get(msg.response));
      pending.delete(msg.response);
      if (msg.error) reject(new DataError(msg.error.status, msg.error.detail));
      else resolve(msg.ok);
    } else if (msg.events != null) {
      for (const event of msg.items) followers.get(msg.events)?.(event);
    }
  };
  model.on("msg:custom", onMessage);
  /** @type {(method: string) => (...args: unknown[]) => Promise<any>} */
  const call = (method) => (...args) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      model.send({ request: id, method, args });
    });
  const source = /** @type {DataSource & {close(): void}} */ (/** @type {unknown} */ (Object.fromEntries(ROUTES.map((r) => [r.method, call(r.method)])))); // beamEvents and close follow
  source.beamEvents = (job, onEvent) => {
    const id = next++;
    let over = false;
    followers.set(id, (event) => {
      if (over) return;
      onEvent(event);
      if (event.event === "done" || event.event === "error") stop();
    });
    const stop = () => {
      if (over) return;
      over = true;
      followers.delete(id);
      model.send({ unfollow: id });
    };
    model.send({ follow: id, job });
    return stop;
  };
  source.close = () => {
    model.off("msg:custom", onMessage);
    for (const { reject } of pending.values()) reject(new DataError(0, "the widget was closed"));
    pending.clear();
  };
  return source;
}

/**
 * @param {WidgetModel} model
 * @returns {Partial<ViewState>}
 */
function stateOf(model) {
  return Object.fromEntries(Object.entries(TRAITS).map(([key, trait]) => [key, fromTrait(key, model.get(trait))]));
}

// The anywidget module's default export, over the bundle's mount() (passed in: main.js imports this file). A
// widget whose `view` traitlet is "beam" is a BEAM search run from a cell (panels/beam-live.js); else the app.
/** @param {typeof import("./main.js").mount} mount */
export function createWidget(mount) {
  return {
    /** @param {{model: WidgetModel, el: HTMLElement}} host */
    render({ model, el }) {
      if (model.get("view") === "beam") return renderBeamLive(el, model);
      const source = commSource(model);
      let applying = false; // a change the view made, being written to the traitlets
      // The view is a box of its own in the widget's element: ipywidgets writes a Layout (w.layout.width = "50%")
      // over that element's inline style, which took the view's height with it.
      const box = document.createElement("div");
      box.className = "uv-widget";
      box.style.height = `${model.get("height")}px`;
      el.append(box);
      // Its static fallback outputs, which stand in for it where it is not live (loader.js draws none while it is)
      const fallback = String(model.get("fallback") ?? "");
      if (fallback) {
        box.dataset.widget = fallback;
        for (const f of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll(".uopviz-static[data-widget]"))) if (f.dataset.widget === fallback) f.style.display = "none";
      }
      const app = mount(box, source, {
        hash: false,
        initial: stateOf(model),
        onState: (s) => {
          const changed = /** @type {[TraitKey, string][]} */ (Object.entries(TRAITS)).filter(([key, trait]) => JSON.stringify(model.get(trait)) !== JSON.stringify(toTrait(key, s[key])));
          if (!changed.length) return;
          applying = true;
          for (const [key, trait] of changed) model.set(trait, toTrait(key, s[key]));
          model.save_changes();
          applying = false;
        },
      });
      const fromPython = () => {
        if (!applying) app.go(stateOf(model));
      };
      const events = Object.values(TRAITS).map((trait) => `change:${trait}`);
      for (const e of events) model.on(e, fromPython);
      return () => {
        for (const e of events) model.off(e, fromPython);
        source.close();
        app.destroy();
        box.remove();
      };
    },
  };
}
