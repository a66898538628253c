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


class TraceSummary(BaseModel):
    id: str
    name: str
    source: Source
    contexts: int


class Axis(BaseModel):
    letter: str
    size: int | str = Field(description="the extent, or 'v' for a symbolic one")
    type: str = Field(description="AxisType name")
    color: str


class PassInfo(BaseModel):
    index: int
    name: str
    stage: str | None
    depth: int
    parent: int | None
    steps: int
    error: str | None


class ContextInfo(BaseModel):
    index: int
    name: str
    kind: str
    axes: list[Axis] = Field(description="parsed from a kernel's name; [] for other contexts")
    kernel_hash: str | None = Field(description="a kernel's content hash, as the tuning database keys it (the "
                                                "input of its lowering); null for other contexts")
    passes: list[PassInfo]


class TraceDetail(BaseModel):
    id: str
    name: str
    source: Source
    device: str | None = Field(description="the device the server lowered it for; null for files and scripts")
    contexts: list[ContextInfo]


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


class RuleInfo(BaseModel):
    location: str
    text: str


class StepView(BaseModel):
    """The graph after k steps of a pass, and what step k changed."""

    root: str
    steps: int = Field(description="number of steps of the pass (k runs 0..steps)")
    nodes: list[GraphNode]
    added: list[str] = Field(description="ids in this graph that the graph after k-1 steps lacks")
    removed: list[str] = Field(description="ids of the graph after k-1 steps that this one lacks")
    rule: RuleInfo | None
    match: str | None
    replacement: str | None
    diff: str = Field(description="unified diff of the matched subtree before and after; '' for k=0")


class OptSpec(BaseModel):
    """One kernel optimization, as `uopviz.codegen.opt.Opt` spells it: an OptOps name, an axis, an argument."""

    model_config = ConfigDict(extra="forbid")
    op: str = Field(description="OptOps member name, e.g. SPLIT", examples=["SPLIT"])
    axis: int | None = None
    arg: int | str | list[int | str | bool] | None = Field(default=None, examples=[[4, "UPCAST", False]])


class KernelView(BaseModel):
    name: str
    device: str | None
    source: str = Field(description="rendered source ('' where the target interprets the Linear program)")
    linear: str = Field(description="the Linear program, one numbered instruction per line")
    opts: list[OptSpec]
    axes: list[Axis]


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


class _Event(BaseModel):
    seq: int = Field(description="1, 2, ...: the event's place in the job's stream")


class StartEvent(_Event):
    event: Literal["start"]
    search_id: int
    kernel: str
    device: str
    resumed: bool
    stored: int = Field(description="candidates stored by an interrupted run of the search, reused")


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
