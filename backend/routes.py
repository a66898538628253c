"""The UI's data contract, once: every method of the UI's data source (frontend/src/data.js) with its HTTP route,
its arguments and their checks, its answer model, its OpenAPI errors and what answers it (an `Answers` method).

Everything else is made from this table: the FastAPI routes (backend/app.py), the Jupyter widget's request
handling (uopviz/widget/requests.py), the request keys of a static export (uopviz/widget/export.py, and
frontend/src/static.js through the table) and the JS clients' methods (frontend/src/routes.js, written from this
table by `python -m uopviz.backend.routes`; a test checks that the committed file is what the table writes).

A new data method is an `Answers` method, its answer model, one `Route` here, its type in
frontend/types/api.d.ts, and the two generated files written again (routes.js, then the bundle).

Two HTTP routes are not data-source methods and live in app.py alone: POST /api/traces (it reads files and runs
scripts on the server's machine) and a BEAM job's event stream (a subscription, which each client follows its own
way).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from uopviz.backend.answers import Answers
from uopviz.backend.models import (
    AppliedOpts,
    ApplyOpts,
    BeamRequest,
    BeamStarted,
    BeamStopped,
    ErrorBody,
    KernelView,
    MachineCode,
    Meta,
    PythonSource,
    ResultView,
    SearchDetail,
    SearchPage,
    StepView,
    TimeRequest,
    TimingView,
    TraceDetail,
    TraceSummary,
)

Responses = dict[int | str, dict[str, Any]]

# The errors an operation may answer, as OpenAPI documents them (the guard's are on every route).
GUARD_ERRORS: Responses = {
    400: {"model": ErrorBody, "description": "a Host header that is not a loopback name, on a loopback server"},
    401: {"model": ErrorBody, "description": "an API request without the token (`Authorization: token X`)"},
}
ERRORS: Responses = {
    404: {"model": ErrorBody, "description": "no such trace, context, pass, step, file, search or BEAM job"},
    422: {"model": ErrorBody, "description": "invalid input"},
}
BODY_ERRORS: Responses = {
    **ERRORS,
    400: {"model": ErrorBody, "description": "a body that is not JSON; a Host header that is not a loopback name"},
    403: {"model": ErrorBody, "description": "a request from another site (Origin, Referer, Sec-Fetch-Site)"},
    415: {"model": ErrorBody, "description": "a body that is not sent as Content-Type: application/json"},
}
DB_ERRORS: Responses = {
    **ERRORS, 503: {"model": ErrorBody, "description": "the tuning database cannot be used (corrupt, from a newer "
                                                       "uopviz, locked, unwritable): the detail names the file and "
                                                       "the way out"}}
BEAM_ERRORS: Responses = {
    **BODY_ERRORS, **DB_ERRORS,
    409: {"model": ErrorBody, "description": "a BEAM search is running already: in this server, or of this kernel in "
                                             "another process (such as `uopviz beam`)"}}

Where = Literal["path", "query", "body"]


@dataclass(frozen=True)
class Arg:
    """One argument of a data method, in the order the JS method takes it. A path or query argument carries its
    checks (pydantic's constraints: ge, le, pattern, max_length); a body argument is a field of the route's body
    model, which checks it."""

    name: str  # the HTTP name (path parameter, query parameter or body field)
    where: Where
    type: Any = None  # path and query: the Python type (a query argument's includes None)
    checks: dict[str, Any] = field(default_factory=dict)
    description: str | None = None
    examples: list[Any] | None = None
    default: Any = None  # a query argument's, when not given

    def checked(self) -> Any:
        """The argument's type with its checks, as pydantic validates it."""
        return Annotated[self.type, Field(**self.checks)]


@dataclass(frozen=True)
class Route:
    """A data method: `method` is its JS name; the answer is `answer(answers, *args)`, args in table order."""

    method: str
    http: Literal["GET", "POST", "DELETE"]
    path: str
    answer: Callable[..., Any]
    response: Any
    args: tuple[Arg, ...] = ()
    body: type[BaseModel] | None = None  # POST and DELETE: the JSON body's model (its fields: the body args)
    errors: Responses = field(default_factory=lambda: dict(ERRORS))
    status: int = 200
    doc: str | None = None
    name: str = ""  # the Python name of the HTTP operation (its OpenAPI operationId starts with it)
    static: bool = False  # a static export holds its answers (a read-only view asks for them)
    json: Callable[..., bytes] | None = None  # the answer as JSON, written a piece at a time (a big answer)

    def required(self) -> int:
        """How many leading arguments must be given (the rest have defaults)."""
        body = self.body.model_fields if self.body is not None else {}
        return sum(a.where == "path" or (a.where == "body" and body[a.name].is_required()) for a in self.args)


TRACE = Arg("trace_id", "path", str, examples=["gemm"])
CONTEXT = Arg("ci", "path", int, {"ge": 0}, examples=[1])
PASS = Arg("pi", "path", int, {"ge": 0}, examples=[0])
STEP = Arg("k", "path", int, {"ge": 0}, examples=[0])
KERNEL_HASH = Arg("kernel_hash", "query", str | None, {"pattern": "^[0-9a-f]+$", "max_length": 64},
                  "only this kernel's (ContextInfo.kernel_hash)", ["8ce5c084a69fcaaa"])
JOB = Arg("job", "path", str, description="a BEAM job's id, as starting it answered", examples=["3f9a0c12b7e4"])
ROW_ID = {"ge": 1, "le": 2**63 - 1}  # SQLite row ids are 64-bit
STEPS = "/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}"
CONTEXT_PATH = "/api/traces/{trace_id}/contexts/{ci}"

ROUTES: tuple[Route, ...] = (
    Route("meta", "GET", "/api/meta", Answers.meta, Meta, errors={}, name="get_meta", static=True,
          doc="Versions, AxisType letters and colours, op groups and colours, devices and the opts each takes: "
              "what a view needs to draw."),
    Route("traces", "GET", "/api/traces", Answers.traces, list[TraceSummary], errors={}, name="list_traces",
          static=True),
    Route("trace", "GET", "/api/traces/{trace_id}", Answers.trace, TraceDetail, (TRACE,), name="get_trace",
          static=True, json=Answers.trace_json),
    Route("step", "GET", STEPS, Answers.step, StepView, (TRACE, CONTEXT, PASS, STEP), name="get_step", static=True,
          doc="The graph after the first k steps of pass pi (k=0: the pass's input) and what step k changed."),
    Route("python", "GET", STEPS + "/python", Answers.python, PythonSource,
          (TRACE, CONTEXT, PASS, STEP, Arg("node", "query", str | None, {"pattern": "^[0-9a-f]{16}$"},
                                            "a node of the graph: only the part under it", ["19967b37d30c0031"])),
          name="get_python",
          doc="The graph after the first k steps of pass pi (or the part of it under `node`) as Python that "
              "rebuilds it with uopviz.uop.ops.UOp; 422 when an arg was stored only as text (it cannot be "
              "rebuilt)."),
    Route("timeKernel", "POST", CONTEXT_PATH + "/time", Answers.time_kernel, TimingView, (TRACE, CONTEXT),
          TimeRequest, BODY_ERRORS, name="time_kernel",
          doc="Run a kernel context's kernel (with the opts it was lowered with) on its device as BEAM times a "
              "candidate: checked against the unoptimized kernel, then timed; with GFLOP/s and GB/s. A kernel "
              "that does not build, run or give the right answer is a 422 saying why."),
    Route("machineCode", "GET", CONTEXT_PATH + "/machine-code", Answers.machine_code, MachineCode, (TRACE, CONTEXT),
          name="get_machine_code",
          doc="The compiled kernel: objdump of the CPU library, the OpenCL program binary's listing (or the "
              "machine code of the ELF it holds), or why there is none to show."),
    Route("kernel", "GET", CONTEXT_PATH + "/kernel", Answers.kernel, KernelView, (TRACE, CONTEXT),
          name="get_kernel", static=True,
          doc="Rendered source and Linear listing of a kernel context (404 for a context that is not a kernel)."),
    Route("applyOpts", "POST", CONTEXT_PATH + "/opts", Answers.apply_opts, AppliedOpts,
          (TRACE, CONTEXT, Arg("opts", "body")), ApplyOpts, BODY_ERRORS, name="apply_opts",
          doc="Lower a kernel again with these opts (the whole list, applied in order to the kernel as "
              "scheduled). The answer names the new kernel, its source and axes, and a trace of its lowering: "
              "the same trace for the same opts on the same kernel. An illegal opt is a 422 whose detail says "
              "why."),
    Route("searches", "GET", "/api/tuning/searches", Answers.searches, SearchPage,
          (KERNEL_HASH,
           Arg("before", "query", int | None, ROW_ID,
               "only searches with a smaller id: the next page's cursor (`next_before`)"),
           Arg("limit", "query", int, {"ge": 1, "le": 1000}, "at most this many", default=200)),
          errors=DB_ERRORS, name="list_searches", static=True,
          doc="Searches in the tuning database, newest first, a page at a time, with their status, candidate "
              "count and best time and opts so far."),
    Route("search", "GET", "/api/tuning/searches/{sid}", Answers.search, SearchDetail,
          (Arg("sid", "path", int, ROW_ID, examples=[1]),), errors=DB_ERRORS, name="get_search", static=True,
          doc="One search: every candidate (parent, round, opts, program, timings or error), each round's "
              "summary, and the winning path from the unoptimized kernel to the best candidate."),
    Route("results", "GET", "/api/tuning/results", Answers.results, list[ResultView], (KERNEL_HASH,),
          errors=DB_ERRORS, name="list_results", static=True,
          doc="The best opts known per kernel and target (what realize() uses), newest first."),
    Route("startBeam", "POST", CONTEXT_PATH + "/beam", Answers.start_beam, BeamStarted,
          (TRACE, CONTEXT, Arg("width", "body"), Arg("max_rounds", "body")), BeamRequest, BEAM_ERRORS, 202,
          name="start_beam",
          doc="Start a BEAM search of a kernel context on its device, in the background (one at a time: 409 "
              "while one runs). It searches even where the database has a result, and resumes an interrupted "
              "search of the same kernel and parameters. Answers once the search has begun; follow it at "
              "/api/beam/{job}/events."),
    Route("stopBeam", "DELETE", "/api/beam/{job}", Answers.stop_beam, BeamStopped,
          (JOB,), errors=BODY_ERRORS, name="stop_beam",
          doc="Stop a BEAM job's search (started with POST .../beam) if it runs, and answer once it has ended; "
              "its event stream ends with an `interrupted` error. What it measured stays in the tuning "
              "database, and a later search of the same kernel and parameters resumes it. 404 for a job this "
              "server does not keep."),
)
BY_METHOD: dict[str, Route] = {r.method: r for r in ROUTES}


class RequestError(ValueError):
    """A request for no data method, or whose arguments do not fit it (answered as 422)."""


_ADAPTERS: dict[str, list[TypeAdapter[Any] | None]] = {
    r.method: [TypeAdapter(a.checked()) if a.where != "body" else None for a in r.args] for r in ROUTES}


_ANSWERS: dict[str, TypeAdapter[Any]] = {r.method: TypeAdapter(r.response) for r in ROUTES}


def answer_json(route: Route, answers: Answers, args: list[Any]) -> bytes:
    """A route's answer as the JSON the HTTP route sends: its `json` where it has one, else written straight from
    its model (FastAPI would check the model again and go through a dict of it first: copies of a big answer)."""
    if route.json is not None:
        return route.json(answers, *args)
    return _ANSWERS[route.method].dump_json(route.answer(answers, *args))


def checked_args(method: Any, args: Any) -> list[Any]:
    """A data method's arguments as a client sends them (a list, in table order; trailing ones may be left out),
    checked as the HTTP route checks them; those left out are their defaults. Raises RequestError."""
    route = BY_METHOD.get(method) if isinstance(method, str) else None
    if route is None:
        raise RequestError(f"no data-source method {method!r}; one of {', '.join(BY_METHOD)}")
    if not isinstance(args, list) or not route.required() <= len(args) <= len(route.args):
        raise RequestError(f"{route.method} takes {route.required()} to {len(route.args)} arguments, as a list; "
                           f"got {args!r}")
    out: list[Any] = []
    body: dict[str, Any] = {}
    try:
        for i, (arg, adapter) in enumerate(zip(route.args, _ADAPTERS[route.method])):
            if adapter is None:  # a body field: the body model checks it, and fills in the defaults
                if i < len(args):
                    body[arg.name] = args[i]
            else:
                out.append(adapter.validate_python(args[i]) if i < len(args) else arg.default)
        if route.body is not None:
            model = route.body.model_validate(body)
            out += [getattr(model, a.name) for a in route.args if a.where == "body"]
    except ValidationError as e:
        raise RequestError(f"{route.method}: {'; '.join(err['msg'] for err in e.errors())}") from None
    return out


def key(method: str, *args: Any) -> str:
    """A static export's request key (frontend/src/static.js spells the same): the method and every argument of
    its route, '*' for one that is null or left out."""
    parts = [*args, *[None] * (len(BY_METHOD[method].args) - len(args))]
    return "/".join([method, *("*" if p is None else str(p) for p in parts)])


JS_ROUTES = Path(__file__).resolve().parents[1] / "frontend" / "src" / "routes.js"


def js_module() -> str:
    """frontend/src/routes.js: the table as the JS clients read it (method, HTTP method, path, arguments, static)."""
    table = [{"method": r.method, "http": r.http, "path": r.path, "args": [[a.name, a.where] for a in r.args],
              "static": r.static} for r in ROUTES]
    rows = ",\n".join(f"  {json.dumps(row, separators=(', ', ': '))}" for row in table)
    return ("// Written by `python -m uopviz.backend.routes` from backend/routes.py, the one route table: do not "
            "edit.\n// Each data method: its name, HTTP method and path, its arguments in order ([name, where]: "
            "path, query\n// or body) and whether a static export holds its answers.\n"
            '/** @type {import("../types/api").RouteSpec[]} */\n'
            f"export const ROUTES = [\n{rows},\n];\n")


if __name__ == "__main__":
    JS_ROUTES.write_text(js_module(), encoding="utf-8")
    sys.stdout.write(f"wrote {JS_ROUTES}\n")
