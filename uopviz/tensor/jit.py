"""`@uopviz.jit`: capture the kernels a function runs, then replay them without scheduling, lowering or looking
anything up.

The first call of a signature runs the function as it is (one-time work such as realizing weights happens
there); the second runs it again and records every kernel launch (program, buffers, variable values); every
later call checks only that the inputs' shapes, dtypes and devices match, puts the inputs' buffers in place of
the recorded ones, and calls the programs. Symbolic sizes replay too: a launch's variables take the values the
inputs are bound to now, and buffers were made for the largest values.

    @uopviz.jit
    def step(x):
        return (x @ w + b).relu()

    for batch in data:
        y = step(batch)          # from the third call: the recorded kernels, nothing else

A result is the caller's to keep: each replay writes its outputs into buffers that no earlier result holds and no
input is (an output fed back in as the next call's input): one of the last two it made where nothing else refers
to it, so a loop that drops each result alternates two (no allocation, no page faults), else new ones. A function
whose kernels depend on Python values other than the inputs (a value read with .numpy(), the global random
generator's counter) cannot be replayed: reading a value or drawing random numbers from the global generator while
capturing is a JitError (draw them outside and pass them in).
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uopviz.runtime import buffer as buffers
from uopviz.tensor import multi
from uopviz.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from uopviz.realize import Launch
    from uopviz.tensor.tensor import Tensor
    from uopviz.tune import Run, Tuning

_capturing: list[str] = []  # the jitted functions being captured, innermost last

SPARES = 2
"""How many Buffers a replay keeps per result buffer to write again once nothing else refers to them."""


def _unheld() -> int:
    """sys.getrefcount of an object only a list holds, read in a loop over the list as _renew reads it (3 on CPython
    3.11: the list, the loop variable, the argument; measured, as an interpreter that borrows references counts
    fewer). tests/tensor/test_jit.py fails on a wrong count: a kept result overwritten, or none written again."""
    count = 0
    for kept in [object()]:
        count = sys.getrefcount(kept)
    return count


_UNHELD = _unheld()


class JitError(RuntimeError):
    """A function that cannot be captured and replayed as it is (the message says why)."""


def capturing() -> str | None:
    """The name of the @jit function being captured now, if any (a value read then would not be replayed)."""
    return _capturing[-1] if _capturing else None


@dataclass
class _Replay:
    """A captured call, ready to replay: each launch's program and argument handles, where the inputs' handles
    go, each launch's variables, and the outputs (buffers, shapes with variables, how they were returned)."""

    launches: list[Launch]  # as captured: each one's kernel, program and opts (an open uopviz.profile() is told)
    handles: list[list[Any]]
    slots: list[list[tuple[int, int, int]]]  # input k -> (launch, argument, its buffer) places it fills
    variables: list[tuple[str, ...]]
    fixed: list[dict[str, int]]  # each launch's variable values that no input's size gives
    outputs: list[tuple[UOp, tuple[int | UOp, ...], str | tuple[str, ...]]]
    single: bool
    fresh: list[tuple[UOp, list[tuple[int, int]]]]  # the outputs' buffers the call made -> (launch, argument) places
    spares: list[list[UOp]]  # per fresh buffer, the last SPARES Buffers made for it

    @functools.cached_property
    def _captured(self) -> list[tuple[int, ...]]:
        """Each launch's variable values where no input's size is symbolic (all of them captured ones), made once."""
        return self._vals({})

    def run(self, inputs: Sequence[Tensor], values: dict[str, int]) -> Any:
        from uopviz.realize import run_launches
        self._bind(inputs)
        new = self._renew()
        try:
            run_launches(self.launches, self.handles, self._vals(values) if values else self._captured)
        finally:
            self._release()
        outs = tuple(_tensor(multi.over(u, new) if multi.is_realized(u) else
                             new.get(u.src[0], u.src[0]).reshape(tuple(_rebind(d, values) for d in shape)), device)
                     for u, shape, device in self.outputs)
        return outs[0] if self.single else outs

    def runs(self, inputs: Sequence[Tensor], values: dict[str, int]) -> list[Run]:
        """Each launch ready to run on its own with the inputs' buffers in place (what whole-model tuning times)."""
        from uopviz.tune import Run
        self._bind(inputs)
        self._renew()
        return [Run(launch.key, launch.kernel.name, launch.prog, handles, vals)
                for launch, handles, vals in zip(self.launches, self.handles, self._vals(values), strict=True)]

    def _bind(self, inputs: Sequence[Tensor]) -> None:
        """Put the inputs' buffers where the captured call's inputs were."""
        for k, t in enumerate(inputs):
            hs = [buffers.handle(b) for b in multi.buffers_of(t.uop)]
            for launch, arg, j in self.slots[k]:
                self.handles[launch][arg] = hs[j]

    def _release(self) -> None:
        """Let go of the inputs' and the results' memory between calls: a Buffer's memory goes back to the pool when
        it dies only where nothing else holds it (else it is freed, and the next Buffer's allocated and faulted in
        anew)."""
        for slots in self.slots:
            for launch, arg, _ in slots:
                self.handles[launch][arg] = None
        for _, places in self.fresh:
            for launch, arg in places:
                self.handles[launch][arg] = None

    def _renew(self) -> dict[UOp, UOp]:
        """A Buffer no result holds for each of the outputs' buffers the call made, its memory put in the launches'
        places: captured buffer -> its Buffer now. One of the last SPARES made for it where nothing else refers to it
        (a loop that drops each result alternates two), else a new one, its memory from the pool: a new Buffer
        node, its memory and the result's return to the pool cost 6 µs, a third of a small program's replay."""
        new: dict[UOp, UOp] = {}
        for (b, places), spares in zip(self.fresh, self.spares, strict=True):
            for buf in spares:
                if sys.getrefcount(buf) <= _UNHELD:
                    break
            else:
                a = b.arg
                spares.append(buf := buffers.new_buffer(a.size, a.dtype, a.device))
                del spares[:-SPARES]
            new[b] = buf
            h = buffers.handle(buf)
            for launch, arg in places:
                self.handles[launch][arg] = h
        return new

    def _vals(self, values: dict[str, int]) -> list[tuple[int, ...]]:
        """Each launch's variable values: the inputs' bound sizes, else the captured ones."""
        return [tuple(values[v] if v in values else fixed[v] for v in names)
                for names, fixed in zip(self.variables, self.fixed, strict=True)]


def jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Capture `fn`'s kernels (Tensors in, a Tensor or a tuple of Tensors out) on its second call per signature
    and replay them on later calls; the wrapper's `captures` counts the signatures captured, `replays` holds
    them. fn may be any callable, a model (an nn.Module) too: errors name it by its class then."""
    name = getattr(fn, "__name__", type(fn).__name__)
    calls: dict[Any, int] = {}
    replays: dict[Any, _Replay] = {}

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        inputs = _inputs(args, name)
        key = tuple(_signature(t) for t in inputs)
        for t in inputs:
            t.realize()
        if (replay := replays.get(key)) is not None:
            return replay.run(inputs, _values(inputs))
        calls[key] = calls.get(key, 0) + 1
        if calls[key] == 1:
            return _realized(fn(*inputs), name)
        replays[key], result = _capture(fn, name, inputs)
        call.captures += 1  # type: ignore[attr-defined]  # the wrapper's own attribute, set below
        return result

    def beam(*args: Any, width: int = 2, budget_s: float | None = None, runs: int = 10, **options: Any) -> Tuning:
        """Tune every kernel this function runs on inputs like `args` (whole-model tuning, uopviz.tune): BEAM of
        `width` over them, most time first, within budget_s seconds; then capture again with the tuned kernels.
        The report has the step's replay time before and after (medians of `runs`), both replays timed in turns
        once tuning is done (`_step_times`). It calls the function (up to twice to capture it, once to capture it
        again) and replays it 2 x (runs + 1) times: a training step's weights move as they would in training.
        `options` are uopviz.tune.tune's (db, executor, workers, ...)."""
        from uopviz.search import policy
        from uopviz.search.db import TuningDB
        from uopviz.tune import tune
        inputs = _inputs(args, name)
        key = tuple(_signature(t) for t in inputs)
        while key not in replays:
            call(*args)
        values = _values(inputs)
        before = replays[key]
        tuning = tune(before.runs(inputs, values), width, budget_s=budget_s, **options)
        db = options.get("db")
        with policy.reading(db.path if isinstance(db, TuningDB) else db):  # the tuned opts, where tune stored them
            replays[key], _ = _capture(fn, name, inputs)
        tuning.step_before_s, tuning.step_after_s = _step_times([before, replays[key]], inputs, values, runs)
        return tuning

    # the wrapper stays a function (so it binds as a method does) and carries these as attributes, which mypy
    # does not know a function has
    call.captures = 0  # type: ignore[attr-defined]  # signatures captured
    call.replays = replays  # type: ignore[attr-defined]  # by signature: what a replay runs, for inspection
    call.beam = beam  # type: ignore[attr-defined]  # whole-model tuning of its kernels
    return call


def _step_times(replays: Sequence[_Replay], inputs: Sequence[Tensor], values: dict[str, int],
                runs: int) -> list[float]:
    """Each replay's median wall time over `runs` replays (each waits for its devices), after one each to warm up,
    taken in turns (the order rotating each turn). Timed apart, the step before tuning and after it are minutes
    apart, and on a shared machine its load moves more than tuning does: a step whose kernels all kept their opts
    read 16.7 ms before and 22.0 ms after (issue 30)."""
    from uopviz.runtime import device as devices
    used = {launch.key[1] for r in replays for launch in r.launches if launch.key is not None}

    def once(replay: _Replay) -> float:
        t0 = time.perf_counter()
        replay.run(inputs, values)
        for d in used:
            devices.get(d).synchronize()
        return time.perf_counter() - t0
    for r in replays:
        once(r)
    times: list[list[float]] = [[] for _ in replays]
    for turn in range(runs):
        for i in [(turn + j) % len(replays) for j in range(len(replays))]:
            times[i].append(once(replays[i]))
    return [statistics.median(t) for t in times]


def _inputs(args: Sequence[Any], name: str) -> list[Tensor]:
    """The call's arguments, which must be distinct Tensors."""
    from uopviz.tensor.tensor import Tensor
    inputs = [a for a in args if isinstance(a, Tensor)]
    if len(inputs) != len(args) or len({id(t) for t in inputs}) != len(inputs):
        raise JitError(f"@jit {name} takes distinct Tensors as positional arguments only (its kernels are "
                       "replayed on new Tensors, not on new Python values)")
    return inputs


def _capture(fn: Callable[..., Any], name: str, inputs: list[Tensor]) -> tuple[_Replay, Any]:
    """Run fn once more, recording its launches, and make the replay of them."""
    from uopviz.realize import capture
    _capturing.append(name)
    mark = buffers.mark()
    try:
        with capture() as launches:
            result = _realized(fn(*inputs), name)
    finally:
        _capturing.pop()
    if not launches:
        raise JitError(f"@jit {name} ran no kernel on its second call (its outputs were computed before, or "
                       "are its inputs): there is nothing to replay; call it without @jit")
    single = not isinstance(result, tuple)
    outs = (result,) if single else result
    positions = {b: (k, j) for k, t in enumerate(inputs) for j, b in enumerate(multi.buffers_of(t.uop))}
    slots: list[list[tuple[int, int, int]]] = [[] for _ in inputs]
    for i, launch in enumerate(launches):
        for arg, b in enumerate(launch.buffers):
            if b in positions:
                k, j = positions[b]
                slots[k].append((i, arg, j))
    given = _values(inputs)
    made: dict[UOp, list[tuple[int, int]]] = {  # not a weight's or an input's: the function's own results
        b: [] for o in outs for b in multi.buffers_of(o.uop) if buffers.made_since(b, mark) and b not in positions}
    for i, launch in enumerate(launches):
        for arg, b in enumerate(launch.buffers):
            if b in made:
                made[b].append((i, arg))
    replay = _Replay(launches, [[buffers.handle(b) for b in launch.buffers] for launch in launches], slots,
                     [launch.kernel.vars for launch in launches],
                     [{v: x for v, x in launch.vals.items() if v not in given} for launch in launches],
                     [(o.uop, tuple(_unbound(d) for d in o.shape), o.device) for o in outs], single, list(made.items()),
                     [[] for _ in made])
    _check_outputs(launches, outs, inputs, name)
    return replay, result


def _check_outputs(launches: list[Launch], outs: Sequence[Tensor], inputs: list[Tensor], name: str) -> None:
    """Every output must be written by a captured launch: one computed before the capture (a closed-over
    Tensor, an input returned as it is) would not change on replay."""
    written = {b for launch in launches for b in launch.buffers[:launch.outputs]}
    for k, o in enumerate(outs):
        if not set(multi.buffers_of(o.uop)) <= written:
            raise JitError(f"@jit {name}: output {k} is not computed by the function's kernels (it is an input or a "
                           "Tensor computed before the call), so a replay would not update it; return a new Tensor "
                           "(e.g. x + 0 or x.contiguous())")


def _realized(result: Any, name: str) -> Any:
    from uopviz.tensor.tensor import Tensor
    outs = (result,) if isinstance(result, Tensor) else result
    if not isinstance(outs, tuple) or not outs or not all(isinstance(o, Tensor) for o in outs):
        raise JitError(f"@jit {name} returned {type(result).__name__}; it must return a Tensor or a tuple of Tensors")
    outs[0].realize(*outs[1:])
    return result


def _tensor(u: UOp, device: str | tuple[str, ...]) -> Tensor:
    from uopviz.tensor.tensor import Tensor
    t = object.__new__(Tensor)
    t._uop, t._device = u, device
    return t


def _signature(t: Tensor) -> tuple[Any, ...]:
    return (tuple(_unbound(d) for d in t.shape), t.dtype, t.device, t.axis)


def _unbound(d: int | UOp) -> int | UOp:
    return d if isinstance(d, int) else d.substitute({u: u.src[0] for u in d.toposort() if u.op is Ops.BIND})


def _values(inputs: Sequence[Tensor]) -> dict[str, int]:
    """The values the inputs' symbolic sizes are bound to."""
    dims = [d for t in inputs for d in t.shape if not isinstance(d, int)]
    return {u.src[0].arg.name: u.src[1].arg.value for d in dims for u in d.toposort() if u.op is Ops.BIND}


def _rebind(d: int | UOp, values: dict[str, int]) -> int | UOp:
    """A dim with its variables bound to this call's values."""
    if isinstance(d, int):
        return d
    return d.substitute({u: u.bind(values[u.arg.name]) for u in d.toposort() if u.op is Ops.DEFINE_VAR})
