"""The widget's requests: each method of the UI's data source (frontend/src/data.js) by its JS name, its arguments
checked as the HTTP routes check theirs, answered by the server's own `backend.answers.Answers`, and turned into
the message the widget's JS side expects: {response, ok} or {response, error: {status, detail}}."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from uopviz.backend.answers import Answers, status_of
from uopviz.backend.models import BeamRequest, OptSpec

Index = Annotated[int, Field(ge=0)]
NodeId = Annotated[str, Field(pattern="^[0-9a-f]{16}$")] | None
KernelHash = Annotated[str, Field(pattern="^[0-9a-f]+$", max_length=64)] | None
Cursor = Annotated[int, Field(ge=1, le=2**63 - 1)] | None

# method -> (its argument types, in order: a shorter list takes the defaults of the rest; how to answer)
_METHODS: dict[str, tuple[list[Any], Callable[..., Any]]] = {
    "meta": ([], lambda a: a.meta()),
    "traces": ([], lambda a: a.traces()),
    "trace": ([str], lambda a, tid: a.trace(tid)),
    "step": ([str, Index, Index, Index], lambda a, tid, ci, pi, k: a.step(tid, ci, pi, k)),
    "kernel": ([str, Index], lambda a, tid, ci: a.kernel(tid, ci)),
    "python": ([str, Index, Index, Index, NodeId], lambda a, tid, ci, pi, k, node=None: a.python(tid, ci, pi, k, node)),
    "timeKernel": ([str, Index], lambda a, tid, ci: a.time_kernel(tid, ci)),
    "machineCode": ([str, Index], lambda a, tid, ci: a.machine_code(tid, ci)),
    "applyOpts": ([str, Index, list[OptSpec]], lambda a, tid, ci, opts: a.apply_opts(tid, ci, opts)),
    "searches": ([KernelHash, Cursor], lambda a, kernel_hash=None, before=None: a.searches(kernel_hash, 200, before)),
    "search": ([Annotated[int, Field(ge=1, le=2**63 - 1)]], lambda a, sid: a.search(sid)),
    "results": ([KernelHash], lambda a, kernel_hash=None: a.results(kernel_hash)),
    "startBeam": ([str, Index, int, int], lambda a, tid, ci, width, rounds: a.start_beam(
        tid, ci, *_beam_args(width, rounds))),
}
_ADAPTERS = {name: [TypeAdapter(t) for t in types] for name, (types, _) in _METHODS.items()}
_REQUIRED = {name: sum(p.default is inspect.Parameter.empty for p in inspect.signature(fn).parameters.values()) - 1
             for name, (_, fn) in _METHODS.items()}  # the arguments without a default (less the Answers)


class RequestError(ValueError):
    """A request the data source has no method for, or whose arguments do not fit it (answered as 422)."""


def _beam_args(width: int, rounds: int) -> tuple[int, int]:
    """The beam width and rounds, in the limits the server's BEAM route takes (BeamRequest)."""
    body = BeamRequest.model_validate({"width": width, "max_rounds": rounds})
    return body.width, body.max_rounds


def _arguments(method: Any, args: Any) -> list[Any]:
    if not isinstance(method, str) or method not in _METHODS:
        raise RequestError(f"no data-source method {method!r}; one of {', '.join(_METHODS)}")
    adapters = _ADAPTERS[method]
    if not isinstance(args, list) or not _REQUIRED[method] <= len(args) <= len(adapters):
        raise RequestError(f"{method} takes {_REQUIRED[method]} to {len(adapters)} arguments, as a list; got {args!r}")
    try:
        return [adapter.validate_python(arg) for adapter, arg in zip(adapters, args)]
    except ValidationError as e:
        raise RequestError(f"{method}: {'; '.join(err['msg'] for err in e.errors())}") from None


def jsonable(answer: Any) -> Any:
    """An answer as JSON-ready data (answers are pydantic models, or lists or dicts of them)."""
    if isinstance(answer, BaseModel):
        return answer.model_dump(mode="json")
    if isinstance(answer, list):
        return [jsonable(x) for x in answer]
    if isinstance(answer, dict):
        return {k: jsonable(v) for k, v in answer.items()}
    return answer


def answer(answers: Answers, request_id: int, method: Any, args: Any) -> dict[str, Any]:
    """The response message to one request: the answer, or the error the HTTP route would give (status, detail)."""
    try:
        values = _arguments(method, args)
        return {"response": request_id, "ok": jsonable(_METHODS[method][1](answers, *values))}
    except (RequestError, ValidationError) as e:
        return {"response": request_id, "error": {"status": 422, "detail": str(e)}}
    except Exception as e:
        status = status_of(e)
        detail = str(e) if status is not None else f"internal error: {type(e).__name__}: {e}"
        return {"response": request_id, "error": {"status": status or 500, "detail": detail}}
