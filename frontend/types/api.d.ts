// The data source's answers, as the server's pydantic models (backend/models.py, the API contract; /openapi.json is
// generated from them) define them, and the data source itself (src/data.js). Only the type checker reads this file
// (npm run typecheck): JSDoc in the sources names these types; nothing here is bundled.

export interface AxisTypeInfo {
  name: string;
  letter: string;
  color: string;
}

export interface OpGroupInfo {
  name: string;
  color: string;
  ops: string[];
}

/** An opt a person may pick (src/opts.js). */
export interface OptChoice {
  label: string;
  op: string;
  split_to: string | null;
  axis: boolean;
  amount: string | null;
  other_axis: boolean;
  top: boolean;
  doc: string;
}

export interface Meta {
  version: string;
  axis_types: AxisTypeInfo[];
  op_groups: OpGroupInfo[];
  other_color: string;
  devices: string[];
  default_device: string;
  opts: OptChoice[];
  device_opts: Record<string, string[]>;
  commutative: string[];
}

/** A SPLIT's arg: [amount, the AxisType split to, top]. */
export type SplitArg = [number, string, boolean];
/** OptSpec: an OptOps name, an axis, an argument (src/opts.js describes the shapes). */
export interface Opt {
  op: string;
  axis: number | null;
  arg: number | string | (number | string | boolean)[] | null;
}

export type TraceSource = "zoo" | "file" | "script" | "opts" | "notebook";

export interface OptsOrigin {
  trace_id: string;
  context: number;
  opts: Opt[];
}

export interface TraceSummary {
  id: string;
  name: string;
  source: TraceSource;
  contexts: number;
  origin: OptsOrigin | null;
}

export interface Axis {
  letter: string;
  size: number | string;
  type: string;
  color: string;
}

export interface RuleProfile {
  location: string;
  matches: number;
  time_ns: number;
}

export interface OptStep {
  opt: Opt;
  text: string;
  before: Axis[];
  after: Axis[];
}

export interface PassInfo {
  index: number;
  name: string;
  stage: string | null;
  depth: number;
  parent: number | null;
  steps: number;
  error: string | null;
  time_ns: number;
  rules: RuleProfile[];
  opt: OptStep | null;
}

export interface Frame {
  file: string;
  line: number;
  function: string;
  code: string;
}

export interface ContextInfo {
  index: number;
  name: string;
  label: string;
  kind: string;
  axes: Axis[];
  kernel_hash: string | null;
  opts: Opt[];
  stack: Frame[];
  time_ns: number;
  passes: PassInfo[];
}

export interface ScriptOutput {
  stdout: string;
  stderr: string;
  truncated: boolean;
}

export interface Roof {
  gflops: number;
  gbs: number;
}

export interface LaunchRow {
  kernel: string;
  /** the kernel context that lowered its graph; null where no pass recorded it */
  context: number | null;
  device: string;
  time_s: number;
  device_s: number;
  flops: number;
  bytes: number;
  share: number;
  gflops: number;
  gbs: number;
  /** its place under its device's roofline: 1 is on the roof */
  roof: number;
  bound: string;
  line: Frame | null;
  /** the Tensor op and user line whose value its kernel stores; null where its graph was built before the profile */
  origin: NodeOrigin | null;
}

export interface ProfileView {
  wall_s: number;
  kernel_s: number;
  roofs: Record<string, Roof>;
  launches: LaunchRow[];
}

export interface TraceDetail {
  id: string;
  name: string;
  source: TraceSource;
  device: string | null;
  origin: OptsOrigin | null;
  output: ScriptOutput | null;
  contexts: ContextInfo[];
  profiles: ProfileView[];
}

export interface GraphNode {
  id: string;
  op: string;
  dtype: string | null;
  /** short display text of the arg */
  arg: string;
  src: string[];
  shape: (number | string)[] | null;
  group: string | null;
  axis_type: string | null;
  color: string;
  /** the Tensor op and user line that made it (absent or null: the trace does not say) */
  origin?: NodeOrigin | null;
}

/** What made a node: the Tensor op and the user's line; grad_of: the forward op's origin it is a gradient of. */
export interface NodeOrigin {
  op: string;
  file: string;
  line: number;
  function: string;
  code?: string | null;
  grad_of?: NodeOrigin | null;
}

export interface RuleInfo {
  location: string;
  text: string;
  time_ns: number;
}

export interface Change {
  kind: "changed" | "added" | "removed" | "rebuilt";
  id: string;
  before: string | null;
  text: string;
  before_text: string | null;
}

export interface StepView {
  root: string;
  steps: number;
  nodes: GraphNode[];
  added: string[];
  removed: string[];
  rebuilt: [string, string][];
  rule: RuleInfo | null;
  match: string | null;
  replacement: string | null;
  changes: Change[];
  changed: number;
  /** a step that changes many nodes said in a few lines */
  summary: string[];
  /** the pass's steps after which the graph is the one before them */
  folded: number[];
}

export interface Work {
  flops: number | null;
  bytes: number | null;
}

export interface KernelView {
  name: string;
  device: string | null;
  source: string;
  linear: string;
  opts: Opt[];
  axes: Axis[];
  work: Work;
}

export interface TimingView {
  device: string;
  opts: Opt[];
  time_s: number;
  samples: number[];
  gflops: number | null;
  gbs: number | null;
}

export interface MachineCode {
  device: string;
  kind: "disassembly" | "listing" | "none";
  text: string;
  note: string;
}

export interface PythonSource {
  root: string;
  text: string;
}

export interface AppliedOpts {
  name: string;
  source: string;
  axes: Axis[];
  opts: Opt[];
  trace_id: string | null;
}

export type SearchStatus = "running" | "done" | "interrupted" | "failed";

export interface TargetInfoView {
  device: string;
  device_name: string;
  driver: string;
  compiler: string;
  compiler_version: string;
}

export interface SearchSummary {
  id: number;
  kernel_name: string;
  kernel_hash: string;
  device: string;
  device_name: string;
  status: SearchStatus;
  error: string | null;
  width: number | null;
  params: unknown;
  best_id: number | null;
  best_s: number | null;
  best_opts: Opt[] | null;
  unoptimized_s: number | null;
  n_candidates: number;
  started_at: number;
  finished_at: number | null;
  job: string | null;
}

export interface SearchPage {
  searches: SearchSummary[];
  next_before: number | null;
}

export interface CandidateView {
  id: number;
  parent: number | null;
  round: number;
  opts: Opt[];
  program_hash: string | null;
  uop_count: number | null;
  compile_s: number | null;
  error: string | null;
  samples: number[];
  median_s: number | null;
  duplicate: boolean;
  built_on: string | null;
  measured_on: string | null;
}

export interface RoundView {
  round: number;
  candidates: number;
  timed: number;
  failed: number;
  duplicates: number;
  best_id: number | null;
  best_s: number | null;
}

export interface SearchDetail extends SearchSummary {
  target: TargetInfoView;
  action_space_version: number;
  uopviz_version: string;
  rounds: RoundView[];
  candidates: CandidateView[];
  winning_path: number[];
}

export interface ResultView {
  kernel_name: string;
  kernel_hash: string;
  target: TargetInfoView;
  action_space_version: number;
  uopviz_version: string;
  opts: Opt[];
  median_s: number;
  search_id: number | null;
  created_at: number;
}

export interface BeamStarted {
  job: string;
  search_id: number;
  kernel_name: string;
  device: string;
  resumed: boolean;
}

// A BEAM job's progress events (GET /api/beam/{job}/events). The notebook's BeamView sends the same events with
// `kernel` replaced by the kernel's index in its list (src/panels/beam-live.js).
export interface StartEvent {
  seq: number;
  event: "start";
  search_id: number;
  kernel: string | number;
  device: string;
  resumed: boolean;
  stored: number;
  executor?: string | null;
}

export interface RoundEvent {
  seq: number;
  event: "round";
  round: number;
  candidates: number;
  measured: number;
}

export interface CandidateEvent {
  seq: number;
  event: "candidate";
  round: number;
  id: number;
  parent: number | null;
  opts: Opt[];
  time_s: number | null;
  error: string | null;
  duplicate: boolean;
  measured: boolean;
  best_s: number | null;
  built_on?: string | null;
  measured_on?: string | null;
}

export interface RoundEndEvent {
  seq: number;
  event: "round_end";
  round: number;
  best_id: number | null;
  best_s: number | null;
}

export interface DoneEvent {
  seq: number;
  event: "done";
  search_id: number | null;
  name: string;
  opts: Opt[];
  time_s: number;
  unoptimized_s: number | null;
  heuristic_s: number | null;
  rounds: number;
  candidates: number;
  /** the notebook's BeamView: the opts came from the tuning database, no search ran */
  from_db?: boolean;
}

export interface ErrorEvent {
  /** absent on the error event a data source makes itself (a lost stream, a static view's refusal) */
  seq?: number;
  event: "error";
  kind: "database" | "kernel" | "busy" | "interrupted" | "failed";
  detail: string;
}

export type BeamEvent = StartEvent | RoundEvent | CandidateEvent | RoundEndEvent | DoneEvent | ErrorEvent;

export interface BeamStopped {
  job: string;
  search_id: number | null;
  stopped: boolean;
}

/** A data method of the route table (src/routes.js, written from backend/routes.py). */
export interface RouteSpec {
  method: string;
  http: "GET" | "POST" | "DELETE";
  /** the path, its arguments in braces: /api/traces/{trace_id} */
  path: string;
  /** the arguments in the method's order: [name, where] */
  args: [string, "path" | "query" | "body"][];
  /** a static export holds its answers */
  static: boolean;
}

/** What the UI reads everything through (src/data.js: httpSource; src/widget.js: commSource; src/static.js). */
export interface DataSource {
  meta(): Promise<Meta>;
  traces(): Promise<TraceSummary[]>;
  trace(tid: string): Promise<TraceDetail>;
  step(tid: string, ci: number, pi: number, k: number): Promise<StepView>;
  python(tid: string, ci: number, pi: number, k: number, node?: string | null): Promise<PythonSource>;
  kernel(tid: string, ci: number): Promise<KernelView>;
  timeKernel(tid: string, ci: number): Promise<TimingView>;
  machineCode(tid: string, ci: number): Promise<MachineCode>;
  applyOpts(tid: string, ci: number, opts: Opt[]): Promise<AppliedOpts>;
  searches(kernelHash?: string | null, before?: number | null): Promise<SearchPage>;
  search(sid: number): Promise<SearchDetail>;
  results(kernelHash?: string | null): Promise<ResultView[]>;
  startBeam(tid: string, ci: number, width: number, maxRounds: number): Promise<BeamStarted>;
  stopBeam(job: string): Promise<BeamStopped>;
  /** Calls onEvent with each event of the job, each once, ending with a "done" or an "error"; returns a stop. */
  beamEvents(job: string, onEvent: (event: BeamEvent) => void): () => void;
}
