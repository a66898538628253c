"""Pydantic models of every request and response body: they are the API contract the frontend codes against,
and /openapi.json is generated from them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Source = Literal["zoo", "file", "script", "opts"]


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


class Meta(BaseModel):
    version: str
    axis_types: list[AxisTypeInfo] = Field(description="in priority order (the order axes sort in a kernel)")
    op_groups: list[OpGroupInfo]
    other_color: str = Field(description="fill of nodes whose op is in no coloured group")
    devices: list[str] = Field(description="devices that start on this machine")
    default_device: str


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
