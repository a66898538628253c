"""Composite Tensor ops (GELU, layer norm, linear, matmul, attention, softmax, cross-entropy, embedding) built by
substitution into a graph kept per input signature.

An eager model builds most of its graph inside a few composites, and every small op in them pays its Tensor-level
Python anew: operand checks, promotion, broadcasting, its node's derived properties. A composite's graph is a
function of its inputs' shapes, dtypes and device and of its other arguments alone, so `templated` builds it once
on placeholder inputs (a Param of each input's shape, dtype and device) and, for inputs of the same signature, builds
the same ops over them: each node from its sources, with the template's dtype and shape and its own gradient rule.
Hash-consing makes the result the very graph a direct build gives (the same UOps); the example GPT's forward builds
its graph in about 60% of the time (bench/eager.py).

A composite is templated only where that holds: no randomness (dropout), no reads of values, one Tensor out on the
inputs' device. Left to a direct build: inputs on several devices or of symbolic sizes, a gradient rule that holds a
graph of its own, and any build while a trace notes each node's origin (it needs the Tensor op on the stack).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from uopviz.realize import OWN_GRADIENT, Recent
from uopviz.uop import ops
from uopviz.uop.ops import Ops, ParamArg, UOp, all_ints

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

F = TypeVar("F", bound=Callable[..., Any])

PLACEHOLDER = "uopviz.template"
"""The tag of a template's placeholder Params: no graph a user or a @function builds has them."""

_CARRIED = frozenset({"dtype", "shape", "device", "min_max", "axis", OWN_GRADIENT})
"""What a template's node may hold in its __dict__ (derived properties, a gradient rule); one with anything else is
left to direct builds."""


class _Step(NamedTuple):
    """One node of a template that depends on its inputs: its op, arg and tag, how to take its sources from the
    values built so far (one index, or an itemgetter of several), its dtype and shape, its own gradient rule's
    inputs (an itemgetter) and rule, if it has one."""

    op: Ops
    one: int
    many: Callable[[list[UOp]], tuple[UOp, ...]] | None
    arg: Any
    tag: Any
    props: dict[str, Any]
    own: tuple[Callable[[list[UOp]], Any], Any] | None


class _Template(NamedTuple):
    """The nodes that depend on the inputs, in build order; `fixed`, the nodes they use that do not (constants),
    numbered after the inputs."""

    fixed: list[UOp]
    steps: list[_Step]


def templated(fn: F) -> F:
    """`fn` (a Tensor method whose graph is a function of its inputs' signatures and its other arguments, returning
    one Tensor) built by substitution into a template kept per signature (the 256 most recently used)."""
    kept: Recent[_Template | Literal[False]] = Recent(256)  # False: this signature is built directly

    def call(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        if ops._on_built is not None:
            return fn(self, *args, **kwargs)
        found = _signature(self, args, kwargs)
        if found is None:
            return fn(self, *args, **kwargs)
        key, inputs = found
        template = kept.get(key)
        if template is None:
            made = _make(fn, self, args, kwargs, inputs)
            template = made if made is not None else False
            kept.put(key, template)
        if template is False:
            return fn(self, *args, **kwargs)
        return self._new(_build(template, inputs))
    # a trace names a node's Tensor op by the code the user's line called (uopviz.trace.origins): fn's, not "call"
    call.__code__ = call.__code__.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)
    return functools.wraps(fn)(call)  # type: ignore[return-value]  # the wrapper has fn's signature


def _signature(self: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[UOp]] | None:
    """The key a call's template is kept under (every Tensor as its input number, shape and dtype; every other
    argument as its value) and the inputs' graphs, each once; None for a call left to a direct build."""
    cls, device = type(self), self._device
    if type(device) is not str:
        return None
    inputs: dict[UOp, int] = {}
    key: list[Any] = []
    for v in (self, *args, *kwargs.values()):
        if isinstance(v, cls):
            u = v._uop
            if v._device != device or not all_ints(shape := u.shape):
                return None
            key.append((inputs.setdefault(u, len(inputs)), shape, u.dtype.name))  # a name hashes in C, a DType not
        else:
            k = _value_key(v)
            if k is None:
                return None
            key.append(k)
    return (tuple(key), device, tuple(kwargs)), list(inputs)


def _value_key(v: Any) -> Any:
    """A non-Tensor argument as a key that tells apart what a build tells apart (1, 1.0 and True; 0.0 and -0.0);
    None for one that has none (a list, a NumPy array, a Tensor inside a tuple)."""
    t = type(v)
    if v is None or t is str or t is int or t is bool:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is tuple:
        items = tuple(_value_key(x) for x in v)
        return None if None in items else (t, items)
    return None


def _make(fn: Callable[..., Any], self: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any],
          inputs: list[UOp]) -> _Template | None:
    """fn's template, built on placeholders of the inputs; None where fn cannot be templated (see the module)."""
    cls = type(self)
    places = [UOp(Ops.PARAM, (UOp.shape_src(u.shape),), ParamArg(k, u.dtype, self._device), PLACEHOLDER)
              for k, u in enumerate(inputs)]
    by = {u: p for u, p in zip(inputs, places, strict=True)}

    def placeholder(v: Any) -> Any:
        return self._new(by[v._uop]) if isinstance(v, cls) else v
    try:
        out = fn(placeholder(self), *map(placeholder, args), **{k: placeholder(v) for k, v in kwargs.items()})
    except Exception:  # a direct build raises it again, naming the user's tensors
        return None
    if not isinstance(out, cls) or out._device != self._device:
        return None
    depends = set(places)
    built = []  # the nodes that depend on the placeholders, sources first
    for u in ops.toposort([out._uop]):
        if u not in depends and any(s in depends for s in u.src):
            depends.add(u)
            built.append(u)
    return _steps(places, built, depends, out._uop)


def _steps(places: list[UOp], built: list[UOp], depends: set[UOp], out: UOp) -> _Template | None:
    """The template of the nodes `built` (those that depend on the placeholders, sources first, `out` last)."""
    fixed = list(dict.fromkeys(s for u in built for s in u.src if s not in depends))
    number = {u: k for k, u in enumerate([*places, *fixed, *built])}
    steps = []
    for u in built:
        u.dtype, u.shape  # noqa: B018  # derived now, to be carried
        d = u.__dict__
        if not d.keys() <= _CARRIED:
            return None
        own = None
        if (rule := d.get(OWN_GRADIENT)) is not None:
            if any(s not in number for s in rule[0]) or _holds_graph(rule[1]):
                return None
            own = (_getter([number[s] for s in rule[0]]), rule[1])
        idx = [number[s] for s in u.src]
        steps.append(_Step(u.op, idx[0], _getter(idx) if len(idx) > 1 else None, u.arg, u.tag,
                           {"dtype": d["dtype"], "shape": d["shape"]}, own))
    if not built or built[-1] is not out:
        return None
    return _Template(fixed, steps)


def _getter(idx: list[int]) -> Callable[[list[UOp]], tuple[UOp, ...]]:
    """The values at idx, as a tuple (itemgetter gives one item, not a tuple, for one index)."""
    if len(idx) == 1:
        k = idx[0]
        return lambda values: (values[k],)
    return operator.itemgetter(*idx)


def _holds_graph(rule: Any, depth: int = 3) -> bool:
    """Whether a gradient rule's closure holds a graph (a Tensor or a UOp, or a function that does): the template's,
    which its instances must not share."""
    from uopviz.tensor.tensor import Tensor
    cells = [c.cell_contents for c in getattr(rule, "__closure__", None) or () if c.cell_contents is not None]
    cells += list(getattr(rule, "__defaults__", None) or ())
    return any(isinstance(v, (Tensor, UOp)) or (depth > 0 and callable(v) and _holds_graph(v, depth - 1))
               for v in cells)


def _build(template: _Template, inputs: list[UOp]) -> UOp:
    """The template's graph over these inputs: each node built from its sources, carrying the template node's dtype
    and shape (where it is new) and gradient rule."""
    values = inputs + template.fixed
    append = values.append
    for op, one, many, arg, tag, props, own in template.steps:
        u = UOp(op, many(values) if many is not None else (values[one],), arg, tag)
        d = u.__dict__
        if "shape" not in d:
            d.update(props)
        if own is not None:
            d[OWN_GRADIENT] = (own[0](values), own[1])
        append(u)
    return values[-1]
