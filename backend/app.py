"""The FastAPI app: JSON routes over a TraceStore, error handlers that keep every failure JSON, and the web UI.

Routes are plain functions, so FastAPI runs them in its thread pool: recording a kernel or replaying a long
pass never blocks the event loop (and so never stalls other requests).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Any, cast

from fastapi import FastAPI, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse
from starlette.middleware.trustedhost import TrustedHostMiddleware

import uopviz
from backend import frontend, views
from backend.display import OTHER_COLOUR
from backend.models import (
    AppliedOpts,
    ApplyOpts,
    AxisTypeInfo,
    ErrorBody,
    KernelView,
    Meta,
    NewTrace,
    OpGroupInfo,
    OptSpec,
    StepView,
    TraceDetail,
    TraceSummary,
)
from backend.recording import RecordError
from backend.store import NotFound, TraceStore
from uopviz.codegen.opt import KernelOptError, Opt
from uopviz.uop.ops import AxisType, GroupOp, Ops

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "no such trace, context, pass, step or file"},
    422: {"model": ErrorBody, "description": "invalid input"},
}
BODY_ERRORS = {**ERRORS, 400: {"model": ErrorBody, "description": "a body that is not JSON"}}

TraceId = Annotated[str, PathParam(examples=["gemm"])]
Context = Annotated[int, PathParam(ge=0, examples=[1])]
Index = Annotated[int, PathParam(ge=0, examples=[0])]


def meta(default_device: str) -> Meta:
    from uopviz.runtime.device import available
    groups = [OpGroupInfo(name=g, color=c, ops=[o.value for o in Ops if GroupOp.group_of(o) == g])
              for g, c in GroupOp.Colour.items()]  # by group_of, so each op is listed where its nodes are drawn
    axis_types = [AxisTypeInfo(name=t.name, letter=t.letter, color=t.colour)
                  for t in sorted(AxisType, key=lambda t: t.priority)]
    return Meta(version=uopviz.__version__, axis_types=axis_types, op_groups=groups, other_color=OTHER_COLOUR,
                devices=available(), default_device=default_device)


def create_app(store: TraceStore, db: Path | None = None, dist: Path = frontend.DIST,
               allowed_hosts: list[str] | None = None) -> FastAPI:
    """The app over `store`. `db` is the tuning database (None: the default one) for the tuning routes;
    `allowed_hosts`, when given, rejects requests for other Host names (a page on another site that rebinds
    its DNS name to 127.0.0.1 cannot reach the API, which can run scripts)."""
    app = FastAPI(title="uopviz", version=uopviz.__version__,
                  description="Recorded rewrites of the uopviz compiler: traces, passes, steps and kernels.")
    app.state.store, app.state.db = store, db
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    _handlers(app)

    @cache
    def cached_meta() -> Meta:  # probing devices starts their runtimes: do it once
        return meta(store.device)

    @app.get("/api/meta", response_model=Meta)
    def get_meta() -> Meta:
        """Versions, AxisType letters and colours, op groups and colours, devices: what a view needs to draw."""
        return cached_meta()

    @app.get("/api/traces", response_model=list[TraceSummary])
    def list_traces() -> list[TraceSummary]:
        return [views.summary(t) for t in store.all()]

    @app.post("/api/traces", response_model=TraceSummary, status_code=201, responses=BODY_ERRORS)
    def new_trace(body: NewTrace) -> TraceSummary:
        """Record a zoo kernel, load a saved trace file, or run a script under the recorder."""
        if body.zoo is not None:
            return views.summary(store.record_zoo(body.zoo, body.device, body.small))
        if body.path is not None:
            return views.summary(store.load_file(body.path))
        return views.summary(store.record_script(cast(str, body.script)))  # the model checked one is given

    @app.get("/api/traces/{trace_id}", response_model=TraceDetail, responses=ERRORS)
    def get_trace(trace_id: TraceId) -> TraceDetail:
        return views.detail(store.get(trace_id))

    @app.get("/api/traces/{trace_id}/contexts/{ci}/passes/{pi}/steps/{k}", response_model=StepView,
             responses=ERRORS)
    def get_step(trace_id: TraceId, ci: Context, pi: Index, k: Index) -> StepView:
        """The graph after the first k steps of pass pi (k=0: the pass's input) and what step k changed."""
        return views.step(store.get(trace_id), ci, pi, k)

    @app.get("/api/traces/{trace_id}/contexts/{ci}/kernel", response_model=KernelView, responses=ERRORS)
    def get_kernel(trace_id: TraceId, ci: Context) -> KernelView:
        """Rendered source and Linear listing of a kernel context (404 for a context that is not a kernel)."""
        return views.kernel(store.get(trace_id), ci)

    @app.post("/api/traces/{trace_id}/contexts/{ci}/opts", response_model=AppliedOpts, responses=BODY_ERRORS)
    def apply_opts(trace_id: TraceId, ci: Context, body: ApplyOpts) -> AppliedOpts:
        """Lower a kernel again with these opts (the whole list, applied in order to the kernel as scheduled).
        The answer names the new kernel, its source and axes, and a new trace of its lowering; an illegal opt
        is a 422 whose detail says why."""
        st = store.get(trace_id)
        ast, device = views.kernel_input(st, ci)
        opts = [Opt.from_json(o.model_dump()) for o in body.opts]
        new, kernel = store.record_opts(st, ci, ast, device, opts)
        return AppliedOpts(name=kernel.name, source=kernel.source or "", axes=views.kernel_axes(kernel.name),
                           opts=[OptSpec(**o) for o in new.kernel_opts[0]], trace_id=new.id)

    frontend.mount(app, dist)
    return app


def _handlers(app: FastAPI) -> None:
    """Map failures to 4xx JSON with a `detail` string; anything unexpected is still JSON, never a bare 500."""

    def error(status: int, detail: str, errors: list[Any] | None = None) -> JSONResponse:
        return JSONResponse(ErrorBody(detail=detail, errors=errors).model_dump(exclude_none=True), status_code=status)

    @app.exception_handler(NotFound)
    @app.exception_handler(FileNotFoundError)
    def not_found(request: Request, exc: Exception) -> JSONResponse:
        return error(404, str(exc))

    @app.exception_handler(RecordError)
    @app.exception_handler(KernelOptError)
    def bad_input(request: Request, exc: Exception) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(RequestValidationError)
    def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        words = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg', '')}" for e in errs)
        parts = [{k: e[k] for k in ("type", "loc", "msg") if k in e} for e in errs]
        return error(422, words or "invalid request", jsonable_encoder(parts))

    @app.exception_handler(Exception)
    def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"internal error: {type(exc).__name__}: {exc}")
