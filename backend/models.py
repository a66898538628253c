"""Pydantic models of every request and response body: they are the API contract the frontend codes against,
and /openapi.json is generated from them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

Source = Literal["zoo", "file", "script", "opts", "notebook"]


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: `detail` says what was wrong in words; `errors` lists a validation failure's parts."""

    detail: str
    errors: list[dict[str, object]] | None = None


class AxisTypeInfo(BaseModel):
    name: str
    letter: str
    color: str


class OpGroupInfo(BaseModel):
    name: str
    color: str
    ops: list[str]


class OptChoice(BaseModel):
    """An opt a person may pick, as uopviz.codegen.opt defines it: a SPLIT to one AxisType, or another OptOp."""

    label: str = Field(description="what the UI calls it: a split's target AxisType, else the OptOp's name",
                       examples=["UPCAST"])
    op: str = Field(description="the OptOps member name", examples=["SPLIT"])
    split_to: str | None = Field(description="a SPLIT's target AxisType: its arg is [amount, split_to, top]")
    axis: bool = Field(description="it applies to an axis")
    amount: str | None = Field(description="what its number is ('factor', 'multiple'); null: it takes none")
    other_axis: bool = Field(description="its arg is another axis (SWAP)")
    top: bool = Field(description="it may split off the top part (arg [k, type, true]) instead of the bottom")
    doc: str


class Meta(BaseModel):
    version: str
    axis_types: list[AxisTypeInfo] = Field(description="in priority order (the order axes sort in a kernel)")
    op_groups: list[OpGroupInfo]
    other_color: str = Field(description="fill of nodes whose op is in no coloured group")
    devices: list[str] = Field(description="devices that start on this machine")
    default_device: str
    opts: list[OptChoice] = Field(description="every opt the UI may offer, in the order it lists them")
    device_opts: dict[str, list[str]] = Field(description="per device of `devices`, the labels of the opts it can "
                                                          "take at all (no LOCAL on a device without work-groups)")
    commutative: list[str] = Field(description="ops whose operands may be swapped (an edge into any other op "
                                               "is numbered by its operand position)")


class OptSpec(BaseModel):
    """One kernel optimization, as `uopviz.codegen.opt.Opt` spells it: an OptOps name, an axis, an argument."""

    model_config = ConfigDict(extra="forbid")
    op: str = Field(description="OptOps member name, e.g. SPLIT", examples=["SPLIT"])
    axis: int | None = None
    arg: int | str | list[int | str | bool] | None = Field(default=None, examples=[[4, "UPCAST", False]])


class OptsOrigin(BaseModel):
    """What an opts trace was lowered from: a kernel context of another trace, and the opts applied to it."""

    trace_id: str
    context: int
    opts: list[OptSpec]


class TraceSummary(BaseModel):
    id: str
    name: str
    source: Source
    contexts: int
    origin: OptsOrigin | None = Field(description="an opts trace's kernel and opts (the UI lists it under that "
                                                  "kernel); null for other traces")


class Axis(BaseModel):
    letter: str
    size: int | str = Field(description="the extent, or 'v' for a symbolic one")
    type: str = Field(description="AxisType name")
    color: str


class RuleProfile(BaseModel):
    """One rule's part in a pass: how often it matched and the time spent in it."""

    location: str
    matches: int
    time_ns: int


class OptStep(BaseModel):
    """The opt an opt pass of the Optimize stage applied, and the kernel's axes before and after it."""

    opt: OptSpec
    text: str = Field(description="the opt and what it did to the axes", examples=["SPLIT a1 (L1024) → L64 × u16"])
    before: list[Axis]
    after: list[Axis]


class PassInfo(BaseModel):
    index: int
    name: str
    stage: str | None
    depth: int
    parent: int | None
    steps: int
    error: str | None
    time_ns: int = Field(description="wall time of the pass, nested passes included")
    rules: list[RuleProfile] = Field(description="the rules that matched, most time first")
    opt: OptStep | None = Field(description="for a pass that applied an opt: the opt and the axes it changed")


class Frame(BaseModel):
    """A frame of the code that made a context (its innermost frames outside uopviz and installed packages)."""

    file: str
    line: int
    function: str
    code: str


class ContextInfo(BaseModel):
    index: int
    name: str
    label: str = Field(description="the name, with ' #n' when other contexts of the trace have the same name")
    kind: str
    axes: list[Axis] = Field(description="parsed from a kernel's name; [] for other contexts")
    kernel_hash: str | None = Field(description="a kernel's content hash, as the tuning database keys it (the "
                                                "input of its lowering); null for other contexts")
    opts: list[OptSpec] = Field(description="a kernel's opts as lowered (the compiler's choice, or those applied)")
    stack: list[Frame] = Field(description="the code that made it, outermost frame first ([] where not recorded)")
    time_ns: int = Field(description="wall time of its top-level passes")
    passes: list[PassInfo]


class ScriptOutput(BaseModel):
    """What a served script printed."""

    stdout: str
    stderr: str
    truncated: bool = Field(description="the output was longer than the server keeps (its first part is shown)")


class Roof(BaseModel):
    """A device's measured roofs: compute (GFLOP/s) and bandwidth (GB/s)."""

    gflops: float
    gbs: float


class NodeOrigin(BaseModel):
    """What made a node (the trace's `origins`, docs/trace-format.md): the Tensor op and the user's line."""

    op: str = Field(description="the Tensor method, e.g. softmax")
    file: str
    line: int
    function: str
    code: str | None = Field(default=None, description="the source line, where it could be read")
    grad_of: NodeOrigin | None = Field(default=None, description="for a node of a gradient: the forward op's "
                                                                 "origin it differentiates")


class LaunchRow(BaseModel):
    """One kernel launch of a profile (docs/profile.md), with what the profile derives from it."""

    kernel: str
    context: int | None = Field(description="the trace's kernel context whose graph it ran (its first pass's "
                                            "input is the launch's `ast`); null where no pass recorded that graph")
    device: str
    time_s: float = Field(description="the launch's wall time: what the step pays for it")
    device_s: float = Field(description="its kernel's time as the device measures it")
    flops: int
    bytes: int
    share: float = Field(description="time_s over the profile's launches' time added up")
    gflops: float
    gbs: float
    roof: float = Field(description="its place under its device's roofline: 1.0 is on the roof")
    bound: str = Field(description="the roof a kernel of its intensity is under: compute or memory")
    line: Frame | None = Field(description="the line of user code that ran it")
    origin: NodeOrigin | None = Field(default=None, description="the Tensor op and user line whose value its kernel "
                                                                "stores (a gradient's: with the forward op's); null "
                                                                "where the graph was built before the profile")


class ProfileView(BaseModel):
    """A `uopviz.profile()` block recorded inside the trace: its launches in launch order."""

    wall_s: float = Field(description="the block's wall time")
    kernel_s: float = Field(description="the launches' wall times added up")
    roofs: dict[str, Roof]
    launches: list[LaunchRow]


class TraceDetail(BaseModel):
    id: str
    name: str
    source: Source
    device: str | None = Field(description="the device the server lowered it for; null for files and scripts")
    origin: OptsOrigin | None = Field(description="an opts trace's kernel and opts; null for other traces")
    output: ScriptOutput | None = Field(description="a script's stdout and stderr; null for other traces")
    contexts: list[ContextInfo]
    profiles: list[ProfileView] = Field(description="the profiled blocks the trace recorded (uopviz.profile())")


class GraphNode(BaseModel):
    id: str
    op: str
    dtype: str | None
    arg: str = Field(description="short display text of the arg")
    src: list[str]
    shape: list[int | str] | None = Field(description="ints, or node ids of symbolic sizes")
    group: str | None = Field(description="op group name (see /api/meta); null for ungrouped ops")
    axis_type: str | None = Field(description="AxisType name of a Range node")
    color: str
    origin: NodeOrigin | None = Field(default=None, description="the Tensor op and user line that made it; null "
                                                                "where the trace does not say")


class RuleInfo(BaseModel):
    location: str
    text: str
    time_ns: int = Field(description="time spent in the rule's function for this match")


class Change(BaseModel):
    """One node of a step's diff, keyed by node identity."""

    kind: Literal["changed", "added", "removed", "rebuilt"] = Field(
        description="changed: the matched node replaced by one of the same op; added: a node of the replacement "
                    "new to the graph; removed: a node of the match that left it; rebuilt: an ancestor that "
                    "hash-consing rebuilt over its new sources (the same node otherwise)")
    id: str = Field(description="the node now (for removed: the node that left)")
    before: str | None = Field(description="changed and rebuilt: the node it replaces")
    text: str = Field(description="op, dtype, arg and sources by label")
    before_text: str | None


class StepView(BaseModel):
    """The graph after k steps of a pass, and what step k changed."""

    root: str
    steps: int = Field(description="number of steps of the pass (k runs 0..steps)")
    nodes: list[GraphNode]
    added: list[str] = Field(description="ids new in this graph (the graph after k-1 steps lacks them), but for "
                                         "the ancestors rebuilt over the replacement (`rebuilt`)")
    removed: list[str] = Field(description="ids of the graph after k-1 steps that left it, but for the ancestors "
                                           "rebuilt (`rebuilt`)")
    rebuilt: list[tuple[str, str]] = Field(description="[before, after] per ancestor of the match rebuilt over its "
                                                       "new sources (same op and arg)")
    rule: RuleInfo | None
    match: str | None
    replacement: str | None
    changes: list[Change] = Field(description="the step as a diff keyed by node identity: the match and its "
                                              "replacement, then the rebuilt ancestors; [] for k=0 and folded steps; "
                                              "at most 200 (a whole-graph pass changes every node)")
    changed: int = Field(description="how many nodes the whole diff has (changes lists the first 200)")
    summary: list[str] = Field(description="a step that changes many nodes (a whole-graph pass) said in a few "
                                           "lines: its re-spellings (\"Range r0 THREAD → Special tidx0\"), the ops "
                                           "that left and came, and the nodes rebuilt over them; [] otherwise")
    folded: list[int] = Field(description="the pass's steps (1..steps) after which the graph is the one before "
                                          "them: the rewriter met a node an earlier step had rewritten (the UI "
                                          "folds them). With the step, not the trace's outline: finding them "
                                          "replays the whole pass, which a big trace cannot do for every pass at "
                                          "once")


class Work(BaseModel):
    """A kernel's work, for GFLOP/s and GB/s: arithmetic on its values (index math left out), and the bytes of its
    buffers (each read or written once); null where a size is symbolic."""

    flops: int | None
    bytes: int | None


class KernelView(BaseModel):
    name: str
    device: str | None
    source: str = Field(description="rendered source ('' where the target interprets the Linear program)")
    linear: str = Field(description="the Linear program, one numbered instruction per line")
    opts: list[OptSpec]
    axes: list[Axis]
    work: Work


class TimeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimingView(BaseModel):
    """A kernel run on its device, as BEAM times a candidate (uopviz.search.timing.Workbench)."""

    device: str
    opts: list[OptSpec]
    time_s: float = Field(description="the median of the timed runs")
    samples: list[float] = Field(description="seconds per timed run")
    gflops: float | None
    gbs: float | None


class MachineCode(BaseModel):
    """The compiled kernel as the device runs it."""

    device: str
    kind: Literal["disassembly", "listing", "none"] = Field(
        description="disassembly: objdump of the CPU library; listing: the OpenCL driver's program binary as text; "
                    "none: there is none to show (`note` says why)")
    text: str
    note: str = Field(description="where the text comes from, or why there is none")


class PythonSource(BaseModel):
    """Python that rebuilds a graph with uopviz.uop.ops.UOp (its last line binds `root`)."""

    root: str
    text: str


class ApplyOpts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    opts: list[OptSpec]


class AppliedOpts(BaseModel):
    name: str
    source: str
    axes: list[Axis]
    opts: list[OptSpec]
    trace_id: str | None = Field(default=None, description="a trace of the new kernel's lowering, when kept")


class NewTrace(BaseModel):
    """Exactly one of: `zoo` (with optional `device`, `small`), `path` (a saved trace file), `script`."""

    model_config = ConfigDict(extra="forbid")
    zoo: str | None = Field(default=None, description="a zoo kernel's name", examples=["gemm"])
    device: str | None = Field(default=None, description="for zoo: the device to lower for (default: the server's)")
    small: bool = Field(default=False, description="for zoo: the small sizes instead of the default ones")
    path: str | None = Field(default=None, description="a saved .uopviz-trace.json on the server's machine")
    script: str | None = Field(default=None, description="a Python script on the server's machine, run under "
                                                         "the recorder")

    @model_validator(mode="after")
    def _one_source(self) -> NewTrace:
        given = [k for k in ("zoo", "path", "script") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of 'zoo', 'path' or 'script' (got {', '.join(given) or 'none'})")
        if self.zoo is None and (self.device is not None or self.small):
            raise ValueError("'device' and 'small' go with 'zoo'")
        return self


# ---- the tuning database and BEAM searches ----
SearchStatus = Literal["running", "done", "interrupted", "failed"]
OPTS_DESCRIPTION = "the opts, applied in order, as OptSpec objects ({op, axis, arg})"
MAX_BEAM_WIDTH = 16
MAX_BEAM_ROUNDS = 16


class TargetInfoView(BaseModel):
    """A device as the tuning database tells devices apart ("" where a device has no such thing)."""

    device: str
    device_name: str
    driver: str
    compiler: str
    compiler_version: str


class SearchSummary(BaseModel):
    id: int
    kernel_name: str = Field(description="the kernel's name without opts")
    kernel_hash: str = Field(description="content hash of the kernel (ContextInfo.kernel_hash)")
    device: str
    device_name: str
    status: SearchStatus = Field(description="running: this server is running it; interrupted: stopped before it "
                                             "finished (running it again resumes it), or run by another process")
    error: str | None = Field(description="why a failed search failed")
    width: int | None = Field(description="the beam width (params.beam)")
    params: JsonValue = Field(description="the search's parameters: beam, max_rounds, threshold")
    best_id: int | None = Field(description="the winner once done; else the fastest verified candidate so far")
    best_s: float | None = Field(description="the best candidate's median time in seconds")
    best_opts: JsonValue = Field(description=f"the best candidate's opts; {OPTS_DESCRIPTION}")
    unoptimized_s: float | None = Field(description="median time of the kernel without opts")
    n_candidates: int
    started_at: float = Field(description="Unix time")
    finished_at: float | None
    job: str | None = Field(description="the BEAM job running it on this server (progress at /api/beam/{job}/events)")


class SearchPage(BaseModel):
    """A page of searches, newest first."""

    searches: list[SearchSummary]
    next_before: int | None = Field(description="pass as `before` for the next (older) page; null: there is none")


class CandidateView(BaseModel):
    id: int
    parent: int | None = Field(description="the candidate it extends by one opt; null for the unoptimized kernel")
    round: int
    opts: JsonValue = Field(description=OPTS_DESCRIPTION)
    program_hash: str | None
    uop_count: int | None = Field(description="instructions in its Linear program")
    compile_s: float | None = Field(description="seconds to lower and compile it")
    error: str | None = Field(description="why it failed to build, run, or give the right answer")
    samples: list[float] = Field(description="seconds per timed run")
    median_s: float | None
    duplicate: bool = Field(description="its program is an earlier candidate's, so it was not timed again")
    built_on: str | None = Field(None, description="the machine (and Ray node) that lowered and compiled it")
    measured_on: str | None = Field(None, description="the machine (and Ray node) that verified and timed it")


class RoundView(BaseModel):
    round: int
    candidates: int
    timed: int
    failed: int
    duplicates: int
    best_id: int | None
    best_s: float | None


class SearchDetail(SearchSummary):
    target: TargetInfoView
    action_space_version: int
    uopviz_version: str
    rounds: list[RoundView]
    candidates: list[CandidateView] = Field(description="by round, then in the order they were measured")
    winning_path: list[int] = Field(description="candidate ids from the unoptimized kernel to the best one, each "
                                                "the parent of the next")


class ResultView(BaseModel):
    """The best opts known for a kernel on a target."""

    kernel_name: str
    kernel_hash: str
    target: TargetInfoView
    action_space_version: int
    uopviz_version: str
    opts: JsonValue = Field(description=OPTS_DESCRIPTION)
    median_s: float
    search_id: int | None = Field(description="the search that found it (null once that search is gone)")
    created_at: float


class BeamRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: int = Field(description="the beam width: how many of a round's best kernels the next round extends",
                       ge=1, le=MAX_BEAM_WIDTH, examples=[2])
    max_rounds: int = Field(default=8, ge=1, le=MAX_BEAM_ROUNDS, description="the most rounds after round 0",
                            examples=[2])


class BeamStarted(BaseModel):
    job: str = Field(description="the job's id: its progress is at /api/beam/{job}/events")
    search_id: int = Field(description="the search in the tuning database (/api/tuning/searches/{search_id})")
    kernel_name: str
    device: str
    resumed: bool = Field(description="an interrupted search of the same kernel and parameters was continued")


class BeamStopped(BaseModel):
    job: str
    search_id: int | None = Field(description="its search in the tuning database: interrupted, resumed by the next "
                                              "search of the same kernel and parameters")
    stopped: bool = Field(description="the search was running and is stopped now (false: it had ended already)")


class _Event(BaseModel):
    seq: int = Field(description="1, 2, ...: the event's place in the job's stream")


class StartEvent(_Event):
    event: Literal["start"]
    search_id: int
    kernel: str
    device: str
    resumed: bool
    stored: int = Field(description="candidates stored by an interrupted run of the search, reused")
    executor: str | None = Field(None, description="where candidates are built and timed (this machine, or a Ray "
                                                   "cluster: nodes, CPUs, timing workers)")


class RoundEvent(_Event):
    """A round began, or grew (round 0 gets the heuristic's kernel after the unoptimized one)."""

    event: Literal["round"]
    round: int
    candidates: int = Field(description="the round's candidates so far")
    measured: int = Field(description="of them, those already measured")


class CandidateEvent(_Event):
    event: Literal["candidate"]
    round: int
    id: int
    parent: int | None
    opts: JsonValue = Field(description=OPTS_DESCRIPTION)
    time_s: float | None = Field(description="its median time; null when it failed or is a duplicate")
    error: str | None
    duplicate: bool
    measured: bool = Field(description="false: taken from an interrupted run of the search")
    best_s: float | None = Field(description="the search's best time so far")
    built_on: str | None = Field(None, description="the machine (and Ray node) that built it")
    measured_on: str | None = Field(None, description="the machine (and Ray node) that timed it")


class RoundEndEvent(_Event):
    event: Literal["round_end"]
    round: int
    best_id: int | None
    best_s: float | None


class DoneEvent(_Event):
    event: Literal["done"]
    search_id: int | None
    name: str = Field(description="the kernel's name with the chosen opts")
    opts: JsonValue = Field(description=OPTS_DESCRIPTION)
    time_s: float
    unoptimized_s: float | None
    heuristic_s: float | None
    rounds: int
    candidates: int


class ErrorEvent(_Event):
    event: Literal["error"]
    kind: Literal["database", "kernel", "busy", "interrupted", "failed"] = Field(
        description="database: the tuning database cannot be used; kernel: this kernel cannot be searched on its "
                    "device; busy: another process is searching this kernel on this device (detail names it); "
                    "interrupted: the search was stopped (running it again resumes it); failed: anything else")
    detail: str


BeamEvent = Annotated[StartEvent | RoundEvent | CandidateEvent | RoundEndEvent | DoneEvent | ErrorEvent,
                      Field(discriminator="event")]
"""One event of a BEAM job's progress stream; the last is always a `done` or an `error`."""
