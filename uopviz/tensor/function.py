"""`@uopviz.function`: a Python function over Tensors, traced once per input signature into a Function graph and
compiled once, then called with new inputs without tracing, scheduling or compiling again.

The dialect's five steps: the Tensors among the arguments are found (each once, by identity); the function runs
lazily on placeholders, `Param(k)` for input k; Tensors it closes over (realized data it reads without being
given it) become further Params, implicit arguments; the outputs are packed into `Function(Tuple(outputs),
*arguments)`; and each output is returned as `GetTuple(function, i)`, lazy like any Tensor. The kernel split
schedules a called Function apart, once per body (uopviz.pipeline.function_schedule), so its kernels are
compiled once and every later call only runs them.

    @uopviz.function
    def layer(x, w, b):
        return (x @ w + b).relu()

    y = layer(x, w, b)          # traced, scheduled and compiled on the first call of this signature
    y2 = layer(x2, w, b)        # the same kernels, new inputs

Called with Tensors on several devices (uopviz/tensor/multi.py), the function runs inline instead: its graph
goes through the shard pass as any other, one graph per device, whose kernels the compile cache still builds
once per shape; a Function over several devices is not made.

A signature is the inputs' shapes (a symbolic size counts as its variable: every bound value shares one trace),
dtypes and devices, and the other arguments' values (which the trace bakes in, so they must be hashable).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uopviz.realize import OWN_GRADIENT
from uopviz.schedule.program import program_order
from uopviz.uop.ops import Ops, UOp

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

_tracing: list[str] = []  # the functions being traced, innermost last


class FunctionTraceError(TypeError):
    """What a @function does cannot be traced into a graph (the message says what and how to change it)."""


@dataclass(frozen=True)
class _Traced:
    """One signature's trace: the Function body, the closed-over buffers it reads, the arguments (inputs, then
    those buffers) it is called with, by number, and how to return outputs."""

    body: UOp
    implicit: tuple[UOp, ...]
    read: tuple[int, ...]
    single: bool


def function(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Trace `fn` (Tensors in, a Tensor or a tuple of Tensors out) into a Function once per input signature; the
    wrapper's `traces` counts how many it has made."""
    cache: dict[Any, _Traced] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        inputs = list({id(t): t for t in _tensors((args, kwargs))}.values())
        if any(isinstance(t.device, tuple) for t in inputs):  # see the module's docstring
            return fn(*args, **kwargs)
        key = (_structure((args, kwargs), inputs), tuple(_signature(t) for t in inputs))
        traced = cache.get(key)
        if traced is None:
            traced = cache[key] = _trace(fn, args, kwargs, inputs)
            call.traces += 1  # type: ignore[attr-defined]  # the wrapper's own attribute, set below
        args = (*(t.uop for t in inputs), *traced.implicit)
        fdef = UOp(Ops.FUNCTION, (traced.body, *(args[k] for k in traced.read)), fn.__name__)
        outs = tuple(_wrap(inputs, UOp(Ops.GETTUPLE, (fdef,), k)) for k in range(len(traced.body.src)))
        return outs[0] if traced.single else outs

    call.traces = 0  # type: ignore[attr-defined]  # a function's attribute (it binds as a method does), untyped
    return call


def tracing() -> str | None:
    """The name of the @function being traced now, if any (a Tensor's value cannot be read then)."""
    return _tracing[-1] if _tracing else None


def _trace(fn: Callable[..., Any], args: Any, kwargs: Any, inputs: list[Tensor]) -> _Traced:
    from uopviz.tensor.tensor import Tensor, TensorBoolError
    placeholders = {id(t): _placeholder(k, t) for k, t in enumerate(inputs)}
    a, kw = _replace((args, kwargs), placeholders)
    _tracing.append(fn.__name__)
    try:
        result = fn(*a, **kw)
    except TensorBoolError:
        raise FunctionTraceError(
            f"cannot trace {fn.__name__}: its Python control flow depends on a Tensor's value (an `if`, `while`, "
            "`and` or `or` on a Tensor), which is not known until the function runs; compute both branches and "
            "choose with Tensor.where, or move the decision out of the function") from None
    finally:
        _tracing.pop()
    single = isinstance(result, Tensor)
    outs = [result] if single else list(result) if isinstance(result, (tuple, list)) else None
    if not outs or not all(isinstance(o, Tensor) for o in outs):
        raise FunctionTraceError(f"{fn.__name__} returned {type(result).__name__}; a @function returns a Tensor or "
                                 "a non-empty tuple of Tensors")
    roots = [_stored(o.uop) for o in outs]
    body, implicit = _closed_over(UOp(Ops.TUPLE, tuple(roots)), len(inputs))
    body, read = read_only(body)
    return _Traced(body, implicit, read, single)


def _placeholder(k: int, t: Tensor) -> Tensor:
    """Input k as the body sees it: Param(k) of the input's shape (symbolic sizes as their variables, so that
    every bound value shares the trace), read as a buffer."""
    shape = tuple(_unbound(d) for d in t.shape)
    return t._new(UOp.param(k, shape, t.dtype, t.device).reshape(shape))


def _stored(u: UOp) -> UOp:
    """An output that is an input as it is gets a copy: a function's outputs are buffers of its own."""
    return UOp(Ops.CONTIGUOUS, (u,)) if u.op is Ops.RESHAPE and u.src[0].op is Ops.PARAM else u


def _closed_over(body: UOp, n_inputs: int) -> tuple[UOp, tuple[UOp, ...]]:
    """The body with each buffer it reads (realized data the function closed over) replaced by a further Param,
    and those buffers, as the implicit arguments after the inputs."""
    buffers = list(dict.fromkeys(u for u in outside_calls(body) if u.op is Ops.BUFFER))
    params = {b: UOp.param(n_inputs + j, (b.arg.size,), b.arg.dtype, b.arg.device) for j, b in enumerate(buffers)}
    rebuilt: dict[UOp, UOp] = {}
    new = body.substitute(params, rebuilt)
    _carry_own_gradients(rebuilt)
    return new, tuple(b.reshape((b.arg.size,)) for b in buffers)


def _carry_own_gradients(rebuilt: dict[UOp, UOp]) -> None:
    """Gradient rules of their own (uopviz.tensor.gradient.own_gradient: special functions, convolution) go with
    their nodes into a rebuilt body, their inputs rebuilt too: a rule is kept in its node's __dict__, which a new
    node does not inherit, and without it backprop went through the parts (an exp's bit tricks: wrong gradients of
    a @function closing over a buffer). The rules build their gradients from the inputs they are given alone."""
    for old, new in rebuilt.items():
        if new is not old and (own := old.__dict__.get(OWN_GRADIENT)) is not None:
            new.__dict__.setdefault(OWN_GRADIENT, (tuple(rebuilt.get(s, s) for s in own[0]), own[1]))


def read_only(body: UOp) -> tuple[UOp, tuple[int, ...]]:
    """The body over only the arguments it reads (the others' Params dropped, the rest numbered in order), and the
    slots of those. A Function's arguments are exactly its body's Params: its schedule is made from the body alone
    (uopviz.pipeline.function_schedule), a placeholder buffer per Param, so an argument it never reads (an input
    used for its shape, a forward input its backward does not need) would have none."""
    read = sorted({u.arg.slot for u in outside_calls(body) if u.op is Ops.PARAM})
    out: dict[UOp, UOp] = {}
    for u in program_order(body):  # not into called functions' bodies, whose Params are their own
        if u.op is Ops.PARAM:
            out[u] = u.replace(arg=u.arg._replace(slot=read.index(u.arg.slot)))
            continue
        src = tuple(s if u.op is Ops.FUNCTION and k == 0 else out[s] for k, s in enumerate(u.src))
        out[u] = u if src == u.src else u.replace(src=src)
    _carry_own_gradients(out)
    return out[body], tuple(read)


def outside_calls(root: UOp) -> Iterator[UOp]:
    """The graph under root, not looking into the bodies of functions it calls (they are traced apart)."""
    seen, stack = {root}, [root]
    while stack:
        u = stack.pop()
        yield u
        for s in u.src[1:] if u.op is Ops.FUNCTION else u.src:
            if s not in seen:
                seen.add(s)
                stack.append(s)


def _unbound(d: int | UOp) -> int | UOp:
    return d if isinstance(d, int) else d.substitute({u: u.src[0] for u in d.toposort() if u.op is Ops.BIND})


def _signature(t: Tensor) -> tuple[Any, ...]:
    return (tuple(_unbound(d) for d in t.shape), t.dtype, t.device)


def _wrap(inputs: list[Tensor], u: UOp) -> Tensor:
    from uopviz.tensor.tensor import Tensor
    t = object.__new__(Tensor)
    dev = u.device or (inputs[0].device if inputs else None)
    if dev is None:
        from uopviz.runtime.device import default_device
        dev = default_device()
    t._uop, t._device = u, dev
    return t


def _tensors(x: Any) -> Iterator[Tensor]:
    from uopviz.tensor.tensor import Tensor
    if isinstance(x, Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _structure(x: Any, inputs: list[Tensor]) -> Any:
    """The arguments with each Tensor as its input number: with the signatures, what a trace is valid for."""
    from uopviz.tensor.tensor import Tensor
    if isinstance(x, Tensor):
        return ("tensor", next(k for k, t in enumerate(inputs) if t is x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_structure(v, inputs) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _structure(v, inputs)) for k, v in x.items()))
    try:
        hash(x)
    except TypeError:
        raise FunctionTraceError(f"a @function's arguments are Tensors and hashable values (the trace bakes values "
                                 f"in); got an unhashable {type(x).__name__}") from None
    return ("value", type(x).__name__, x)


def _replace(x: Any, by: dict[int, Tensor]) -> Any:
    from uopviz.tensor.tensor import Tensor
    if isinstance(x, Tensor):
        return by[id(x)]
    if isinstance(x, (list, tuple)):
        return type(x)(_replace(v, by) for v in x)
    if isinstance(x, dict):
        return {k: _replace(v, by) for k, v in x.items()}
    return x
