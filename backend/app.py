"""The FastAPI app: JSON routes over a TraceStore and the tuning database (the data methods' made from the route
table, backend/routes.py), BEAM searches with their progress as server-sent events, error handlers that keep every
failure JSON, and the web UI.

Routes are plain functions, so FastAPI runs them in its thread pool: recording a kernel or replaying a long
pass never blocks the event loop (and so never stalls other requests). The one async route, the event stream,
only reads what a search's reader thread has kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from inspect import Parameter, Signature
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi.sse import EventSourceResponse
from uopviz.backend import device_list, frontend, views
from uopviz.backend.answers import STATUSES, Answers
from uopviz.backend.heap import TrimAfter
from uopviz.backend.models import BeamEvent, ErrorBody, NewTrace, TraceSummary
from uopviz.backend.routes import BODY_ERRORS, ERRORS, GUARD_ERRORS, JOB, ROUTES, Responses, Route, answer_json
from uopviz.backend.security import Access, BadPath, Forbidden, Guard, confine, error, is_api
from uopviz.backend.store import TraceStore
from uopviz.backend.tuning import BeamJob

import uopviz

FILE_ERRORS: Responses = {
    **BODY_ERRORS,
    403: {"model": ErrorBody, "description": "a request from another site; a file or script outside the "
                                             "directories the server may read, or a script that is not a .py file"},
}
# The event stream's errors are JSON, not its own media type: spelled out, since FastAPI would document a model
# given here as text/event-stream (ErrorBody is in the schema's components through the other routes).
STREAM_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": e["description"],
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for status, e in {**GUARD_ERRORS, **ERRORS}.items()}
EVENT_POLL_S = 0.1


def _beam_job(request: Request, job: Annotated[str, PathParam(description=JOB.description, examples=JOB.examples)]
              ) -> BeamJob:
    """The BEAM job a path names (a dependency, so that an unknown one is a 404 before any event is sent)."""
    return cast(Answers, request.app.state.answers).beam_job(job)


def create_app(store: TraceStore, db: Path | None = None, dist: Path = frontend.DIST, *, access: Access,
               allow_dirs: Sequence[Path] = ()) -> FastAPI:
    """The app over `store`. `db` is the tuning database (None: the default one) for the tuning routes; `access`
    is what every request must satisfy (backend.security); `allow_dirs` (resolved) are the directories whose
    files and scripts requests may name (none: no such request is allowed)."""
    answers = Answers(store, db)
    device_list.start()  # the devices are listed by a child process, so their runtimes stay out of the server

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(answers.stop)  # a search is not left running past the server

    app = FastAPI(title="uopviz", version=uopviz.__version__, lifespan=lifespan,
                  description="Recorded rewrites of the uopviz compiler: traces, passes, steps and kernels; the "
                              "tuning database; BEAM searches and their live progress.", responses=GUARD_ERRORS)
    app.state.store, app.state.answers, app.state.beams = store, answers, answers.beams
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    app.add_middleware(TrimAfter)  # a big answer's garbage is not kept (backend/heap.py)
    app.add_middleware(Guard, access=access)  # added last, so it sees every request first
    _handlers(app)

    for route in ROUTES:
        app.add_api_route(route.path, _endpoint(route, answers), methods=[route.http], name=route.name,
                          response_model=route.response, status_code=route.status, responses=route.errors,
                          description=route.doc or "")

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


def _endpoint(route: Route, answers: Answers) -> Callable[..., Any]:
    """A route's FastAPI operation: its path and query arguments as parameters with their checks, its body as
    the body model; it answers `route.answer(answers, *args)`, args in table order."""
    params = []
    for a in route.args:
        if a.where == "body":
            continue
        spec = dict(**a.checks, description=a.description, examples=a.examples)
        if a.where == "path":
            params.append(Parameter(a.name, Parameter.KEYWORD_ONLY, annotation=Annotated[a.type, PathParam(**spec)]))
        else:
            params.append(Parameter(a.name, Parameter.KEYWORD_ONLY, default=a.default,
                                    annotation=Annotated[a.type, Query(**spec)]))
    if route.body is not None:
        params.append(Parameter("body", Parameter.KEYWORD_ONLY, annotation=route.body))

    def endpoint(**given: Any) -> Response:
        body = given.get("body")
        args = [getattr(body, a.name) if a.where == "body" else given[a.name] for a in route.args]
        return Response(answer_json(route, answers, args), status_code=route.status, media_type="application/json")

    signature = Signature(params, return_annotation=route.response)
    endpoint.__signature__ = signature  # type: ignore[attr-defined]  # no typed slot; inspect (so FastAPI) reads it
    endpoint.__name__ = route.name
    return endpoint


def _document_token(app: FastAPI) -> None:
    """Declare in /openapi.json what the guard enforces: every /api operation needs the token as a bearer
    credential, so /docs offers "Authorize" and sends it (the guard takes `Bearer X` and `token X` alike)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()  # FastAPI's, which it keeps in app.openapi_schema
        schema.setdefault("components", {})["securitySchemes"] = {"token": {
            "type": "http", "scheme": "bearer",
            "description": "the token at the end of the URL `uopviz serve` prints (?token=X), sent as "
                           "`Authorization: Bearer X`"}}
        for path, operations in schema["paths"].items():
            if is_api(path):
                for operation in operations.values():
                    operation["security"] = [{"token": []}]
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the schema


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
