"""The widget's requests: each method of the UI's data source (frontend/src/data.js) by its JS name, its arguments
checked as the HTTP routes check theirs (both from the one route table, backend/routes.py), answered by the
server's own `backend.answers.Answers`, and turned into the message the widget's JS side expects:
{response, ok} or {response, error: {status, detail}}."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from uopviz.backend.answers import Answers, status_of
from uopviz.backend.routes import BY_METHOD, RequestError, checked_args


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
        values = checked_args(method, args)
        return {"response": request_id, "ok": jsonable(BY_METHOD[method].answer(answers, *values))}
    except (RequestError, ValidationError) as e:
        return {"response": request_id, "error": {"status": 422, "detail": str(e)}}
    except Exception as e:
        status = status_of(e)
        detail = str(e) if status is not None else f"internal error: {type(e).__name__}: {e}"
        return {"response": request_id, "error": {"status": status or 500, "detail": detail}}
