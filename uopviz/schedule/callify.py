"""Callify: the Tensor graph of the tensors being realized becomes one stateless Function.

Every Buffer (realized data) becomes a Param slot, and the outputs are packed in a Tuple: the body then holds no
state, so equal programs over different data are equal graphs, and the Function's sources say which buffers fill
which slots. A called Function's body has no Buffers (it was callified when it was made), so it is not walked.
"""

from __future__ import annotations

from collections.abc import Sequence

from uopviz.schedule.program import sources
from uopviz.trace import origins
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.pattern import PatternMatcher, UPat, graph_rewrite


class Slots:
    """The buffers a function reads, in the order their Param slots were given."""

    def __init__(self) -> None:
        self.buffers: list[UOp] = []
        self.slot: dict[UOp, int] = {}

    def param(self, b: UOp) -> UOp:
        if b not in self.slot:
            self.slot[b] = len(self.buffers)
            self.buffers.append(b)
        a = b.arg
        return UOp.param(self.slot[b], (a.size,), a.dtype, a.device, a.addrspace)


buffers_to_params = PatternMatcher([
    (UPat(Ops.BUFFER, name="b"), lambda ctx, b: ctx.param(b)),
], name="buffers to params")


def callify(roots: Sequence[UOp]) -> UOp:
    """Function(Tuple(*roots with buffers as Params), *buffers)."""
    slots = Slots()
    program = UOp(Ops.TUPLE, tuple(roots))
    body = graph_rewrite(program, buffers_to_params, ctx=slots, sources=sources)
    origins.same(program, body)  # the nodes rebuilt over Params say which Tensor ops they compute
    return UOp(Ops.FUNCTION, (body, *slots.buffers))
