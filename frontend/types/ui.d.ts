// The UI's own contracts between modules: the view state, the side panel's panels, the drawn graph and its layout.
// Only the type checker reads this file (npm run typecheck); nothing here is bundled.
import type {
  AppliedOpts,
  ContextInfo,
  DataSource,
  KernelView,
  Meta,
  Opt,
  PassInfo,
  StepView,
  TraceDetail,
} from "./api";

export type { Layout, LayoutGraph, LayoutSpacing } from "./layout";

/** The view state (src/state.js), kept in the URL hash on the web page and in traitlets in a widget. */
export interface ViewState {
  tid: string | null;
  ci: number | null;
  pi: number;
  k: number;
  opts: Opt[] | null;
  tab: string;
  search: number | null;
  /** the node selected (its id) */
  node: string | null;
  /** the graph's search text */
  query: string | null;
  /** the Calls of a schedule drawn opened to their kernels, the others being boxes (their node ids) */
  calls: string[];
}

/** The view state once the app has picked the trace and context shown. */
export type ShownState = ViewState & { tid: string; ci: number };

/** A kernel context lowered again with opts: the opts answer with the new kernel's view, when it loaded. */
export type Variant = AppliedOpts & Partial<KernelView>;

/** What a panel may use of the app (src/panels/registry.js). */
export interface PanelContext {
  meta: Meta;
  axisColors: Map<string, string>;
  source: DataSource;
  readOnly: boolean;
  fetch<T>(key: string, load: () => Promise<T>): Promise<T>;
  /** a step's answer, from the app's cache */
  step(tid: string, ci: number, pi: number, k: number): Promise<StepView>;
  go(patch: Partial<ViewState>, push?: boolean): void;
  state(): ViewState;
  selectNode(id: string): void;
  variant(tid: string, ci: number, opts: Opt[]): Promise<Variant>;
  openOpts(opts: Opt[] | null, patch?: Partial<ViewState>): Promise<void>;
  showText(title: string, text: string): void;
  showPython(): Promise<void>;
}

/** What a panel is told whenever the view changes; step is null until the graph's data has loaded. */
export interface PanelView {
  trace: TraceDetail;
  context: ContextInfo;
  shown: { trace: TraceDetail; context: ContextInfo };
  pass: PassInfo | undefined;
  state: ShownState;
  step: StepView | null;
}

export interface Panel {
  update(view: PanelView): unknown;
  destroy(): void;
}

export interface PanelDef {
  id: string;
  title: string;
  create(el: HTMLElement, ctx: PanelContext): Panel;
}

/** A node as drawn (src/graph/display.js): one node of the step, or several alike, or a hub's copy. */
export interface DisplayNode {
  id: string;
  ref: string;
  refs: string[];
  op: string;
  group: string;
  axisType: string | null;
  lines: { kind: "title" | "expr" | "sub"; text: string }[];
  expr: string | null;
  hub: boolean;
  status: string | null;
  fill: string;
  ink: string;
  width: number;
  height: number;
}

export interface DisplayEdge {
  v: string;
  w: string;
  name: string;
  operand: string | null;
  bridged: boolean;
  status: string | null;
  hidden: boolean;
}

export interface DisplayGraph {
  /** what the drawn graph depends on: the layout cache's key */
  key: string;
  root: string | null;
  nodes: DisplayNode[];
  edges: DisplayEdge[];
  match: string | null;
  replacement: string | null;
  total: number;
}

/** The anywidget model, as much of it as the bundle uses. */
export interface WidgetModel {
  get(name: string): any;
  set(name: string, value: unknown): void;
  save_changes(): void;
  send(msg: unknown): void;
  on(event: string, fn: (...args: any[]) => void): void;
  off(event: string, fn: (...args: any[]) => void): void;
}
