"""The FastAPI app: JSON routes over a TraceStore and the tuning database, BEAM searches with their progress as
server-sent events, error handlers that keep every failure JSON, and the web UI.

Routes are plain functions, so FastAPI runs them in its thread pool: recording a kernel or replaying a long
pass never blocks the event loop (and so never stalls other requests). The one async route, the event stream,
only reads what a search's reader thread has kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse
from uopviz.backend import frontend, views
from uopviz.backend.answers import STATUSES, Answers
from uopviz.backend.models import (
    AppliedOpts,
    ApplyOpts,
    BeamEvent,
    BeamRequest,
    BeamStarted,
    BeamStopped,
    ErrorBody,
    KernelView,
    MachineCode,
    Meta,
    NewTrace,
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
from uopviz.backend.security import Access, BadPath, Forbidden, Guard, confine, error, is_api
from uopviz.backend.store import TraceStore
from uopviz.backend.tuning import BeamJob

import uopviz

# what the guard (backend.security) may answer on any route
GUARD_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "a Host header that is not a loopback name, on a loopback server"},
    401: {"model": ErrorBody, "description": "an API request without the token (`Authorization: token X`)"},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "no such trace, context, pass, step, file, search or BEAM job"},
    422: {"model": ErrorBody, "description": "invalid input"},
}
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: {"model": ErrorBody, "description": "a body that is not JSON; a Host header that is not a loopback name"},
    403: {"model": ErrorBody, "description": "a request from another site (Origin, Referer, Sec-Fetch-Site)"},
    415: {"model": ErrorBody, "description": "a body that is not sent as Content-Type: application/json"},
}
FILE_ERRORS: dict[int | str, dict[str, Any]] = {
    **BODY_ERRORS,
    403: {"model": ErrorBody, "description": "a request from another site; a file or script outside the "
                                             "directories the server may read, or a script that is not a .py file"},
}
DB_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS, 503: {"model": ErrorBody, "description": "the tuning database cannot be used (corrupt, from a newer "
                                                       "uopviz, locked, unwritable): the detail names the file and "
                                                       "the way out"}}
BEAM_ERRORS: dict[int | str, dict[str, Any]] = {
    **BODY_ERRORS, **DB_ERRORS,
    409: {"model": ErrorBody, "description": "a BEAM search is running already: in this server, or of this kernel in "
                                             "another process (such as `uopviz beam`)"}}
# The event stream's errors are JSON, not its own media type: spelled out, since FastAPI would document a model
# given here as text/event-stream (ErrorBody is in the schema's components through the other routes).
STREAM_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": e["description"],
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for status, e in {**GUARD_ERRORS, **ERRORS}.items()}
EVENT_POLL_S = 0.1

TraceId = Annotated[str, PathParam(examples=["gemm"])]
Context = Annotated[int, PathParam(ge=0, examples=[1])]
Index = Annotated[int, PathParam(ge=0, examples=[0])]
SearchId = Annotated[int, PathParam(ge=1, le=2**63 - 1, examples=[1])]  # SQLite row ids are 64-bit
NodeId = Annotated[str | None, Query(description="a node of the graph: only the part under it",
                                    pattern="^[0-9a-f]{16}$", examples=["19967b37d30c0031"])]
JobId = Annotated[str, PathParam(description="a BEAM job's id, as starting it answered", examples=["3f9a0c12b7e4"])]
KernelHash = Annotated[str | None, Query(description="only this kernel's (ContextInfo.kernel_hash)",
                                         pattern="^[0-9a-f]+$", max_length=64, examples=["8ce5c084a69fcaaa"])]


def _beam_job(request: Request, job: JobId) -> BeamJob:
    """The BEAM job a path names (a dependency, so that an unknown one is a 404 before any event is sent)."""
    return cast(Answers, request.app.state.answers).beam_job(job)


def create_app(store: TraceStore, db: Path | None = None, dist: Path = frontend.DIST, *, access: Access,
               allow_dirs: Sequence[Path] = ()) -> FastAPI:
    """The app over `store`. `db` is the tuning database (None: the default one) for the tuning routes; `access`
    is what every request must satisfy (backend.security); `allow_dirs` (resolved) are the directories whose
    files and scripts requests may name (none: no such request is allowed)."""
    answers = Answers(store, db)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(answers.stop)  # a search is not left running past the server

    app = FastAPI(title="uopviz", version=uopviz.__version__, lifespan=lifespan,
                  description="Recorded rewrites of the uopviz compiler: traces, passes, steps and kernels; the "
                              "tuning database; BEAM searches and their live progress.", responses=GUARD_ERRORS)
    app.state.store, app.state.answers, app.state.beams = store, answers, answers.beams
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    app.add_middleware(Guard, access=access)  # added last, so it sees every request first
    _handlers(app)

    @app.get("/api/meta", response_model=Meta)
    def get_meta() -> Meta:
        """Versions, AxisType letters and colours, op groups and colours, devices and the opts each takes: what a
        view needs to draw."""
        return answers.meta()

    @app.get("/api/traces", response_model=list[TraceSummary])
    def list_traces() -> list[TraceSummary]:
        return answers.traces()

    @app.post("/api/traces", response_model=TraceSummary, status_code=201, responses=FILE_ERRORS)
    def new_trace(body: NewTrace) -> TraceSummary:
        """Record a zoo kernel, load a saved trace file, or run a script under the recorder. Files and scripts
        must lie under a directory the server was started with (`--allow-dir`, or a file's directory)."""
        if body.zoo is not None:
            return views.summary(store.record_zoo(body.zoo, body.device, body.small))
        if body.path is not None:
            return views.summary(store.load_file(confine(body.path, allow_dirs)))
        script = confine(cast(str, body.script), allow_dirs, suffix=".py")  # the model checked one is given
        return views.summary(store.record_script(script))

    @app.get("/api/traces/{trace_id}", response_model=TraceDetail, responses=ERRORS)
    def get_trace(trace_id: TraceId) -> TraceDetail:
        return answers.trace(trace_id)

    @app.get("/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}", response_model=StepView,
             responses=ERRORS)
    def get_step(trace_id: TraceId, ci: Context, pi: Index, k: Index) -> StepView:
        """The graph after the first k steps of pass pi (k=0: the pass's input) and what step k changed."""
        return answers.step(trace_id, ci, pi, k)

    @app.get("/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}/python", response_model=PythonSource,
             responses=ERRORS)
    def get_python(trace_id: TraceId, ci: Context, pi: Index, k: Index, node: NodeId = None) -> PythonSource:
        """The graph after the first k steps of pass pi (or the part of it under `node`) as Python that rebuilds
        it with uopviz.uop.ops.UOp; 422 when an arg was stored only as text (it cannot be rebuilt)."""
        return answers.python(trace_id, ci, pi, k, node)

    @app.post("/api/traces/{trace_id}/contexts/{ci}/time", response_model=TimingView, responses=BODY_ERRORS)
    def time_kernel(trace_id: TraceId, ci: Context, body: TimeRequest) -> TimingView:
        """Run a kernel context's kernel (with the opts it was lowered with) on its device as BEAM times a
        candidate: checked against the unoptimized kernel, then timed; with GFLOP/s and GB/s. A kernel that does
        not build, run or give the right answer is a 422 saying why."""
        return answers.time_kernel(trace_id, ci)

    @app.get("/api/traces/{trace_id}/contexts/{ci}/machine-code", response_model=MachineCode, responses=ERRORS)
    def get_machine_code(trace_id: TraceId, ci: Context) -> MachineCode:
        """The compiled kernel: objdump of the CPU library, the OpenCL program binary's listing (or the machine
        code of the ELF it holds), or why there is none to show."""
        return answers.machine_code(trace_id, ci)

    @app.get("/api/traces/{trace_id}/contexts/{ci}/kernel", response_model=KernelView, responses=ERRORS)
    def get_kernel(trace_id: TraceId, ci: Context) -> KernelView:
        """Rendered source and Linear listing of a kernel context (404 for a context that is not a kernel)."""
        return answers.kernel(trace_id, ci)

    @app.post("/api/traces/{trace_id}/contexts/{ci}/opts", response_model=AppliedOpts, responses=BODY_ERRORS)
    def apply_opts(trace_id: TraceId, ci: Context, body: ApplyOpts) -> AppliedOpts:
        """Lower a kernel again with these opts (the whole list, applied in order to the kernel as scheduled).
        The answer names the new kernel, its source and axes, and a trace of its lowering: the same trace for
        the same opts on the same kernel. An illegal opt is a 422 whose detail says why."""
        return answers.apply_opts(trace_id, ci, body.opts)

    @app.get("/api/tuning/searches", response_model=SearchPage, responses=DB_ERRORS)
    def list_searches(kernel_hash: KernelHash = None,
                      limit: Annotated[int, Query(ge=1, le=1000, description="at most this many")] = 200,
                      before: Annotated[int | None, Query(ge=1, le=2**63 - 1, description=(
                          "only searches with a smaller id: the next page's cursor (`next_before`)"))] = None,
                      ) -> SearchPage:
        """Searches in the tuning database, newest first, a page at a time, with their status, candidate count
        and best time and opts so far."""
        return answers.searches(kernel_hash, limit, before)

    @app.get("/api/tuning/searches/{sid}", response_model=SearchDetail, responses=DB_ERRORS)
    def get_search(sid: SearchId) -> SearchDetail:
        """One search: every candidate (parent, round, opts, program, timings or error), each round's summary,
        and the winning path from the unoptimized kernel to the best candidate."""
        return answers.search(sid)

    @app.get("/api/tuning/results", response_model=list[ResultView], responses=DB_ERRORS)
    def list_results(kernel_hash: KernelHash = None) -> list[ResultView]:
        """The best opts known per kernel and target (what realize() uses), newest first."""
        return answers.results(kernel_hash)

    @app.post("/api/traces/{trace_id}/contexts/{ci}/beam", response_model=BeamStarted, status_code=202,
              responses=BEAM_ERRORS)
    def start_beam(trace_id: TraceId, ci: Context, body: BeamRequest) -> BeamStarted:
        """Start a BEAM search of a kernel context on its device, in the background (one at a time: 409 while
        one runs). It searches even where the database has a result, and resumes an interrupted search of the
        same kernel and parameters. Answers once the search has begun; follow it at /api/beam/{job}/events."""
        return answers.start_beam(trace_id, ci, body.width, body.max_rounds)

    @app.delete("/api/beam/{job}", response_model=BeamStopped, responses=BODY_ERRORS)
    def stop_beam(job: JobId) -> BeamStopped:
        """Stop a BEAM job's search (started with POST .../beam) if it runs, and answer once it has ended; its
        event stream ends with an `interrupted` error. What it measured stays in the tuning database, and a
        later search of the same kernel and parameters resumes it. 404 for a job this server does not keep."""
        return answers.stop_beam(job)

    @app.get("/api/beam/{job}/events", response_class=EventSourceResponse, responses=STREAM_ERRORS)
    async def beam_events(found: Annotated[BeamJob, Depends(_beam_job)]) -> AsyncIterator[BeamEvent]:
        """A BEAM job's progress as server-sent events, each `data:` one JSON event: start, round, candidate,
        round_end, and last a done or an error, after which the stream ends. Every stream replays the job from
        its first event, so a page opened late (or reconnecting) sees the whole search; `seq` numbers them."""
        seen = 0
        while True:
            new, over = found.since(seen)
            for event in new:
                yield event
            seen += len(new)
            if over:
                return
            await anyio.sleep(EVENT_POLL_S)

    frontend.mount(app, dist)
    _document_token(app)
    return app


def _document_token(app: FastAPI) -> None:
    """Declare in /openapi.json what the guard enforces: every /api operation needs the token as a bearer
    credential, so /docs offers "Authorize" and sends it (the guard takes `Bearer X` and `token X` alike)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()  # FastAPI's, which it keeps in app.openapi_schema
            schema.setdefault("components", {})["securitySchemes"] = {"token": {
                "type": "http", "scheme": "bearer",
                "description": "the token at the end of the URL `uopviz serve` prints (?token=X), sent as "
                               "`Authorization: Bearer X`"}}
            for path, operations in schema["paths"].items():
                if is_api(path):
                    for operation in operations.values():
                        operation["security"] = [{"token": []}]
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _handlers(app: FastAPI) -> None:
    """Map failures to 4xx JSON with a `detail` string; anything unexpected is still JSON, never a bare 500."""

    # the named errors the routes raise, by the status that answers them (their message is the detail)
    statuses: dict[type[Exception], int] = {**STATUSES, Forbidden: 403, BadPath: 422}
    for kind, status in statuses.items():
        app.add_exception_handler(kind, lambda request, exc, status=status: error(status, str(exc)))

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        words = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', '')}" for e in errs)
        parts = [{k: e[k] for k in ("type", "loc", "msg") if k in e} for e in errs]
        return error(422, words or "invalid request", jsonable_encoder(parts))

    @app.exception_handler(Exception)
    def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"internal error: {type(exc).__name__}: {exc}")
