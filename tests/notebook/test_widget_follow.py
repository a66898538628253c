"""TraceView's BEAM follows without a kernel: one thread sends every followed job's events however many follow
messages come, a view follows a bounded number of jobs, and close() stops following and stops the search even while
followed jobs are ending."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest

from uopviz.widget import view as viewmod
from uopviz.widget.view import TraceView


class Job:
    """A BEAM job as the view reads it: events come when added; over once ended."""

    def __init__(self, ended: threading.Event | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.ended = ended or threading.Event()

    def since(self, seq: int) -> tuple[list[dict[str, Any]], bool]:
        return self.events[seq:], self.ended.is_set()


class Answers:
    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}
        self.stopped = 0

    def beam_job(self, job: str) -> Job:
        if job not in self.jobs:
            raise LookupError(f"no BEAM job {job}")
        return self.jobs[job]

    def stop(self) -> None:
        self.stopped += 1


class View(TraceView):
    """A TraceView that keeps what it sends, as the page would receive it."""

    def __init__(self, answers: Any) -> None:
        super().__init__(answers)
        self.sent: list[dict[str, Any]] = []

    def send(self, content: Any, buffers: Any = None) -> None:
        self.sent.append(content)

    def events(self, follow_id: int) -> list[Any]:
        return [e for m in list(self.sent) if m.get("events") == follow_id for e in m["items"]]


def followers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("uopviz-follow")]


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.005)


@pytest.fixture(autouse=True)
def fast_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(viewmod, "FOLLOW_POLL_S", 0.005)


def test_a_followed_job_sends_its_events_to_its_end_and_unfollow_stops_them() -> None:
    answers, ended = Answers(), threading.Event()
    answers.jobs = {"a": Job(ended), "b": Job()}
    v = View(answers)
    answers.jobs["a"].events.append({"event": "start"})
    v._on_msg(None, {"follow": 1, "job": "a"}, [])
    v._on_msg(None, {"follow": 2, "job": "b"}, [])
    v._on_msg(None, {"follow": 3, "job": "nope"}, [])
    wait_for(lambda: v.events(1) == [{"event": "start"}])
    assert v.events(3) == [{"event": "error", "kind": "failed", "detail": "no BEAM job nope"}]
    answers.jobs["a"].events.append({"event": "round"})
    answers.jobs["a"].events.append({"event": "done"})
    ended.set()
    wait_for(lambda: len(v.events(1)) == 3)
    assert v.events(1) == [{"event": "start"}, {"event": "round"}, {"event": "done"}]
    v._on_msg(None, {"unfollow": 2}, [])
    wait_for(lambda: not followers())
    answers.jobs["b"].events.append({"event": "start"})
    time.sleep(0.05)
    assert v.events(2) == []
    v.close()


def test_follow_messages_start_one_thread_and_are_bounded() -> None:
    answers = Answers()
    answers.jobs = {"a": Job()}
    v = View(answers)
    before = threading.active_count()
    for i in range(200):
        v._on_msg(None, {"follow": i, "job": "a"}, [])
    started = threading.active_count() - before
    v.close()  # before asserting, or the old code's 200 threads poll on
    assert started <= 1
    v = View(answers)
    for i in range(200):
        v._on_msg(None, {"follow": i, "job": "a"}, [])
    refused = v.events(viewmod.MAX_FOLLOWS)
    assert refused and refused[0]["event"] == "error" and "follows 16 searches already" in refused[0]["detail"]
    answers.jobs["a"].events.append({"event": "start"})
    wait_for(lambda: all(v.events(i) == [{"event": "start"}] for i in range(viewmod.MAX_FOLLOWS)))
    v.close()
    assert not followers() and answers.stopped == 2  # each view stops the search as it closes


def test_close_while_followed_jobs_end_stops_everything() -> None:
    """Jobs ending while close() runs took entries out of the dict close() was iterating over: it raised
    "dictionary changed size during iteration" before stopping the search."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race at its most likely
    try:
        for _ in range(5):
            answers, ending = Answers(), threading.Event()
            answers.jobs = {"a": Job(ending)}
            v = View(answers)
            for i in range(16):
                v._on_msg(None, {"follow": i, "job": "a"}, [])
            ending.set()
            v.close()
            assert answers.stopped == 1
            wait_for(lambda: not followers())
    finally:
        sys.setswitchinterval(old)


def test_a_closed_view_follows_nothing() -> None:
    answers = Answers()
    answers.jobs = {"a": Job()}
    v = View(answers)
    v.close()
    v._on_msg(None, {"follow": 1, "job": "a"}, [])
    assert not followers()
