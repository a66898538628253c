"""Reverse-mode differentiation of Tensor-level UOp graphs: one rule per op, applied from the output back.

A rule takes the gradient of a node's output and the node, and gives the gradient of each of its sources (None
where a source gets none: shape sources, conditions, integer operands). Gradients are themselves Tensor-level
graphs built from the same primitives, so the backward pass is scheduled, lowered, traced and tuned like any
forward pass. Only float nodes carry gradients; a float node whose op has no rule is a GradientError.

Matmul, gather and scatter need no rules of their own: they are compositions of Mul, Where, Reduce and movement
ops (SPEC), so their gradients are the compositions of these rules (a matmul's gradient is again a broadcast
multiply and a sum, i.e. two matmuls). One composition has a rule of its own, recognised by its shape:
the logistic function 1/(1 + 2^z) that sigmoid is (and tanh, silu and gelu's tanh form are built on), whose
chain rule through its parts overflows. And a composition can be given a rule of its own where it is built
(`own_gradient`): convolution, whose chain rule through its sliding-window view is a col2im of div/mod index
chains, where its gradients are convolutions again.

Conventions are PyTorch's: at a tie, max gives each side half; the side of a where not taken gets exactly 0, and a
zero gradient stays zero through a rule whose local derivative is infinite there (2^z that overflowed, 1/x at 0),
so that side cannot turn 0·inf into NaN. Copy sends the gradient back to its source's device, laid out as the
source is (sharded along its axis, or replicated), so sharding and the collectives are differentiable.

Calls of a @function are differentiated through their bodies, and the backward pass is a Function too: the
body's gradient with respect to its Params, with the output gradients as further Params, called with the same
arguments. It is scheduled once per body, like the forward function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from uopviz.realize import OWN_GRADIENT
from uopviz.tensor.function import outside_calls, read_only
from uopviz.trace import origins
from uopviz.uop.ops import Ops, UOp, toposort
from uopviz.uop.props import shape_from_src

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor

Grads = tuple["Tensor | None", ...]
_LN2 = math.log(2)

OwnRule = Callable[["Tensor", tuple["Tensor", ...], tuple[bool, ...]], Grads]
"""(gradient of the output, the inputs, whether each needs a gradient) -> the inputs' gradients (None where not
needed)."""

_OWN = OWN_GRADIENT
"""Where an output node keeps (its inputs' nodes, its rule): in its __dict__, so it goes with its graph, and backprop
reads it with a dict lookup for every node it visits (a WeakKeyDictionary made a weak reference per lookup). Not in
the node's arg, which is hashable data the spec checks; hash-consing makes the same composition of the same inputs
the same node, whose rule is then the same too."""


def own_gradient(out: Tensor, inputs: tuple[Tensor, ...], rule: OwnRule) -> Tensor:
    """out, a composition of inputs, differentiated by rule instead of through its parts (the rule must give the
    same gradients, built any way that lowers better). Returns out."""
    out.uop.__dict__[_OWN] = (tuple(t.uop for t in inputs), rule)
    return out


class GradientError(RuntimeError):
    """A graph that cannot be differentiated (an op with no gradient rule on the path, a non-scalar output
    without an output gradient, a target that is not a float tensor)."""


def _src(g: Tensor, u: UOp, i: int) -> Tensor:
    return g._new(u.src[i])


def _out(g: Tensor, u: UOp) -> Tensor:
    return g._new(u)


def nonzero(g: Tensor, grad: Tensor) -> Tensor:
    """grad (g times a local derivative that can be infinite) where g is not 0, and 0 where it is: a value the loss
    does not depend on there (the side of a where not taken) adds nothing, where 0·inf would be NaN."""
    return g.ne(0).where(grad, 0.0)


def _max_share(g: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """The part of max(a, b)'s gradient that goes to a: all of it where a wins, half on a tie (torch.maximum's
    convention; abs, max(x, −x), gets 0 at 0). Chosen by where, so an infinite g is never multiplied by 0."""
    return a.gt(b).where(g, a.eq(b).where(g.mul(0.5), 0.0))


def _reduce_grad(g: Tensor, u: UOp) -> Grads:
    """Sum: the gradient broadcast back. Max: shared among the elements equal to the max. Prod: the product of
    the other elements, computed without dividing by a zero (the product of the non-zero elements goes to the
    only zero, nothing to any zero when there are two)."""
    x, op, axes = _src(g, u, 0), u.arg.op, u.arg.axes
    ge = g.expand(x.shape)
    if op is Ops.ADD:
        return (ge,)
    out = _out(g, u).expand(x.shape)
    if op is Ops.MAX:
        if _recomputes_a_sum(x.uop):  # compared with the max of the very values a kernel reads
            x = x.contiguous()
            out = x._reduce_op(Ops.MAX, axes, True).expand(x.shape)
        hit = x.eq(out)
        return (hit.where(ge.div(hit.cast(g.dtype)._reduce_op(Ops.ADD, axes, True).expand(x.shape)), 0.0),)
    zero = x.eq(0)
    nonzero_prod = zero.where(1.0, x).cast(x.dtype)._reduce_op(Ops.MUL, axes, True).expand(x.shape)
    zeros = zero.cast(x.dtype)._reduce_op(Ops.ADD, axes, True).expand(x.shape)
    others = zero.where(zeros.eq(1).where(nonzero_prod, 0.0), out.div(zero.where(1.0, x))).cast(x.dtype)
    return (ge.mul(others),)


def _recomputes_a_sum(x: UOp) -> bool:
    """Whether a kernel reading the lazy x computes a reduction in it again: its adds may run in another order there
    (other opts), so x == max(x) could hold for no element and the max's gradient vanish (fuzzer, CPU seed 50038:
    the min of a variance). Elementwise ops give the same bits in every kernel; a Contiguous is read, not redone."""
    seen, todo = {x}, [x]  # a search that ends at the first reduction (attention scores: a matmul's, at once)
    while todo:
        v = todo.pop()
        if v.op is Ops.REDUCE:
            return True
        if v.op is not Ops.CONTIGUOUS:
            for s in v.src:
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
    return False


def _pow_base_grad(g: Tensor, u: UOp) -> Tensor:
    """d(a^b)/da = b·a^(b−1), 0 where b = 0 (a^0 is 1 for every a; 0·0^−1 would be NaN). PyTorch's convention."""
    a, b = _src(g, u, 0), _src(g, u, 1)
    return b.eq(0).where(0.0, nonzero(g, g.mul(b.mul(a.pow(b.sub(1))))))


def _pow_exponent_grad(g: Tensor, u: UOp) -> Tensor:
    """d(a^b)/db = a^b·ln a, 0 at a = 0 with b >= 0 (where a^b is 0 or 1 and flat in b from the right). PyTorch's
    convention."""
    a, b, out = _src(g, u, 0), _src(g, u, 1), _out(g, u)
    return a.eq(0).bitwise_and(b.ge(0)).where(0.0, nonzero(g, g.mul(out.mul(a.log()))))


def _logistic(g: Tensor, u: UOp, targets: set[UOp]) -> tuple[UOp, Tensor] | None:
    """For u = 1/(1 + 2^z), the logistic function, (z, the gradient of z): ds/dz = −ln2·s·(1 − s). Through the
    parts, the chain rule multiplies 2^z by s², which is NaN (inf·0) where 2^z overflows and loses every digit where
    s² underflows first; this is as exact as s. None where u is not that composition (or a part of it is a target,
    which must get its own gradient)."""
    if u.op is not Ops.RECIP or (add := u.src[0]).op is not Ops.ADD or add in targets:
        return None
    exp, one = add.src if add.src[0].op is Ops.EXP2 else add.src[::-1]
    if exp.op is not Ops.EXP2 or exp in targets or _const(one) != 1:
        return None
    s = _out(g, u)
    return exp.src[0], g.mul(s).mul(s.sub(1, reverse=True)).mul(-_LN2)


def _const(u: UOp) -> float | None:
    """The value of a constant brought to a shape (a Const under reshapes and expands), else None."""
    while u.op in (Ops.RESHAPE, Ops.EXPAND):
        u = u.src[0]
    return u.arg.value if u.op is Ops.CONST else None


def _pad_grad(g: Tensor, u: UOp) -> Grads:
    """Pad's gradient keeps the window the source was placed in."""
    src = u.src[0]
    return (g._new(g.uop.shrink(shape_from_src(u, 1), src.shape)),)


def _shrink_grad(g: Tensor, u: UOp) -> Grads:
    """Shrink's gradient is zero outside the kept window: a Pad back to the source's shape."""
    src = u.src[0]
    return (g._new(g.uop.pad(shape_from_src(u, 1), src.shape)),)


def _expand_grad(g: Tensor, u: UOp) -> Grads:
    """Every copy of a broadcast element sends its gradient back: a sum over the expanded axes."""
    src = u.src[0]
    axes = tuple(k for k, (a, b) in enumerate(zip(src.shape, u.shape)) if a != b)
    return (g.sum(axes, keepdim=True) if axes else g,)


def _placed(g: Tensor, like: UOp) -> Tensor:
    """g on like's device, laid out as like is: sharded along its axis, or replicated on each device."""
    dev = like.device
    if not isinstance(dev, tuple):
        return g.to(dev)
    return g if (g.device, g.axis) == (dev, like.axis) else g.shard(dev, like.axis)


def _replicated_grad(g: Tensor, u: UOp) -> Grads:
    """Replicated is its source's first element along its axes (every device holds the same value there): that
    element gets the gradient, the others zeros (a Pad, as Shrink's gradient)."""
    src = u.src[0]
    return (g._new(g.uop.pad((0,) * len(src.shape), src.shape)),)


def _cast_grad(g: Tensor, u: UOp) -> Grads:
    """Cast's gradient is cast back (none into an int or bool source)."""
    return (g.cast(u.src[0].dtype) if u.src[0].dtype.is_float else None,)


# op -> one rule per source (gradient of the output, the node) -> that source's gradient: ops whose sources'
# gradients are built apart, so only those of sources on the path are built (x·2, max(x, 0), a masked fill and the
# data side of a matmul would build one each, unused)
PER_SOURCE: dict[Ops, tuple[Callable[[Tensor, UOp], Tensor | None], ...]] = {
    Ops.MUL: (lambda g, u: g.mul(_src(g, u, 1)), lambda g, u: g.mul(_src(g, u, 0))),
    Ops.MAX: (lambda g, u: _max_share(g, _src(g, u, 0), _src(g, u, 1)),
              lambda g, u: _max_share(g, _src(g, u, 1), _src(g, u, 0))),
    Ops.POW: (_pow_base_grad, _pow_exponent_grad),
    Ops.WHERE: (lambda g, u: None, lambda g, u: _src(g, u, 0).where(g, 0.0), lambda g, u: _src(g, u, 0).where(0.0, g)),
}

# op -> rule(gradient of the output, the node) -> gradients of its sources
RULES: dict[Ops, Callable[[Tensor, UOp], Grads]] = {
    Ops.ADD: lambda g, u: (g, g),
    Ops.RECIP: lambda g, u: (nonzero(g, g.mul(_out(g, u)).mul(_out(g, u)).neg()),),
    Ops.EXP2: lambda g, u: (nonzero(g, g.mul(_out(g, u)).mul(_LN2)),),
    Ops.LOG2: lambda g, u: (nonzero(g, g.div(_src(g, u, 0).mul(_LN2))),),
    Ops.SIN: lambda g, u: (g.mul(_src(g, u, 0).cos()),),
    Ops.SQRT: lambda g, u: (nonzero(g, g.div(_out(g, u).mul(2))),),
    Ops.CAST: _cast_grad,
    # piecewise constant (zero almost everywhere), and reinterpreted bits (no derivative): no gradient
    Ops.TRUNC: lambda g, u: (None,),
    Ops.BITCAST: lambda g, u: (None,),
    Ops.REDUCE: _reduce_grad,
    Ops.RESHAPE: lambda g, u: (g.reshape(u.src[0].shape), None),
    Ops.PERMUTE: lambda g, u: (g.permute(tuple(u.arg.index(k) for k in range(len(u.arg)))),),
    Ops.EXPAND: _expand_grad,
    Ops.PAD: _pad_grad,
    Ops.SHRINK: _shrink_grad,
    Ops.FLIP: lambda g, u: (g.flip(tuple(k for k, f in enumerate(u.arg) if f)),),
    Ops.CONTIGUOUS: lambda g, u: (g,),
    Ops.COPY: lambda g, u: (_placed(g, u.src[0]),),
    Ops.REPLICATED: _replicated_grad,
    # SPEC: the gradient flowing through ContiguousBackward is made contiguous
    Ops.CONTIGUOUS_BACKWARD: lambda g, u: (g.contiguous(),),
    # Detach: the gradient stops here
    Ops.DETACH: lambda g, u: (None,),
}


def backprop(seeds: dict[UOp, Tensor], targets: Iterable[UOp], order: list[UOp] | None = None) -> dict[UOp, Tensor]:
    """The gradients of the seeded outputs (output node -> its gradient) with respect to each target node that
    they depend on through differentiable ops; a target they do not depend on is left out. `order`: toposort(seeds),
    where the caller has it already."""
    targets = set(targets)
    order = toposort(seeds) if order is None else order
    # the nodes through which a target reaches an output: only they need gradients
    on_path: set[UOp] = set()
    function = Ops.FUNCTION
    for u in order:  # _inputs inlined, and the set test before the dtype's: once per node of the graph
        # a Function's dtype is its first output's: a bool first output cut the float ones off (its GetTuples judge)
        if u in targets or (not on_path.isdisjoint(u.src[1:] if u.op is function else u.src) and
                            (u.dtype.is_float or u.op is function)):
            on_path.add(u)
    grads: dict[UOp, Tensor] = {}
    called: dict[UOp, dict[int, Tensor]] = {}  # Function -> output index -> gradient of its GetTuple
    for u, g in seeds.items():
        if u in on_path:
            grads[u] = g

    def add(u: UOp, g: Tensor) -> None:
        grads[u] = g if u not in grads else grads[u].add(g)

    noting = origins.active()
    try:
        _backprop(order, on_path, grads, called, targets, add, noting)
    finally:
        if noting:
            origins.gradient_of(None)
    return {t: grads[t] for t in targets if t in grads}


def _backprop(order: list[UOp], on_path: set[UOp], grads: dict[UOp, Tensor], called: dict[UOp, dict[int, Tensor]],
              targets: set[UOp], add: Callable[[UOp, Tensor], None], noting: bool) -> None:
    """backprop's walk from the outputs to the targets, each node's rule adding its sources' gradients; `noting`:
    a trace notes origins, so each node's gradient nodes are marked as its (origins.gradient_of)."""
    function, gettuple = Ops.FUNCTION, Ops.GETTUPLE  # locals: reading an Enum's member is slow in Python 3.11
    for u in reversed(order):
        op = u.op
        if u not in on_path or (op is not function and u not in grads) or (u in targets and not u.src):
            continue
        if noting:
            origins.gradient_of(u)
        if op is gettuple:
            outs = called.setdefault(u.src[0], {})
            outs[u.arg] = grads[u] if u.arg not in outs else outs[u.arg].add(grads[u])
            continue
        if op is function:
            if u in called:
                for arg, g in _function_grads(u, called[u], on_path).items():
                    add(arg, g)
            continue
        if op in _SOURCES:
            continue
        if (own := u.__dict__.get(_OWN)) is not None:
            srcs, own_rule = own
            g = grads[u]
            for s, sg in zip(srcs, own_rule(g, tuple(g._new(s) for s in srcs), tuple(s in on_path for s in srcs))):
                if sg is not None and s in on_path:
                    add(s, sg)
            continue
        if (fused := _logistic(grads[u], u, targets)) is not None:
            if fused[0] in on_path:
                add(*fused)
            continue
        if (parts := PER_SOURCE.get(u.op)) is not None:
            for s, part in zip(u.src, parts):
                if s in on_path and (sg := part(grads[u], u)) is not None:
                    add(s, sg)
            continue
        rule = RULES.get(u.op)
        if rule is None:
            raise GradientError(f"no gradient rule for {u.op.value}; it is on the path from a target to the output")
        for s, sg in zip(u.src, rule(grads[u], u)):
            if sg is not None and s in on_path:
                add(s, sg)


_SOURCES = frozenset({Ops.BUFFER, Ops.PARAM, Ops.CONST})
"""Ops whose gradient goes nowhere further."""


def _inputs(u: UOp) -> tuple[UOp, ...]:
    """The sources a gradient can flow to (a Function's body is differentiated apart, through its outputs)."""
    return u.src[1:] if u.op is Ops.FUNCTION else u.src


def _function_grads(fn: UOp, out_grads: dict[int, Tensor], on_path: set[UOp]) -> dict[UOp, Tensor]:
    """The gradients of a called Function's arguments: a backward Function over the same arguments plus the output
    gradients (as Params after them), those its body reads, whose body is the forward body's gradient with
    respect to its Params."""
    body, args = fn.src[0], fn.src[1:]
    params = {p.arg.slot: p for p in outside_calls(body) if p.op is Ops.PARAM}
    wanted = [k for k, a in enumerate(args) if a in on_path and k in params]
    some = next(iter(out_grads.values()))
    seeds: dict[UOp, Tensor] = {}
    seed_args: list[UOp] = []
    for k, g in sorted(out_grads.items()):
        out = body.src[k]
        p = UOp.param(len(args) + len(seed_args), out.shape, out.dtype, g.device).reshape(out.shape)
        seeds[out] = some._new(p) if out not in seeds else seeds[out].add(some._new(p))
        seed_args.append(g.uop)
    inner = backprop(seeds, [params[k] for k in wanted])
    got = [k for k in wanted if params[k] in inner]
    if not got:
        return {}
    outs = [_stored(inner[params[k]].uop.reshape(args[k].shape)) for k in got]
    unique = list(dict.fromkeys(outs))  # arguments with the same gradient (x and y of x + y) share its output
    bwd_body, read = read_only(UOp(Ops.TUPLE, tuple(unique)))
    bwd_args = (*args, *seed_args)
    bwd = UOp(Ops.FUNCTION, (bwd_body, *(bwd_args[k] for k in read)), f"{fn.arg}_backward")
    return {args[k]: some._new(UOp(Ops.GETTUPLE, (bwd,), unique.index(o))) for k, o in zip(got, outs, strict=True)}


def _stored(u: UOp) -> UOp:
    """A Function output that is one of its Params, reshaped at most, gets a copy (a function's outputs are
    buffers of its own)."""
    base = u
    while base.op is Ops.RESHAPE:
        base = base.src[0]
    return UOp(Ops.CONTIGUOUS, (u,)) if base.op is Ops.PARAM else u
