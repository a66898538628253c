"""How much code a kernel's opts make: an estimate, read from the optimized kernel before Expand, of the operations
Expand and Instruction Selection will write for it (what the C compiler then compiles, and what devectorize and
the passes after it walk). It is a measure, not a rule: the heuristic (heuristic.py) decides what size is too
much. `executed_ops` counts the other way, what the kernel runs (each op once per element it computes), which the
heuristic weighs against waking the other cores.

Each value computed in the kernel counts:
- its operations: 1 for an op the target computes, the size of its decomposition for one it does not (a float32
  Sin is a few hundred primitives, held in float64; Exp2 some twenty), so a transcendental weighs what it costs;
- times its copies: the product of the UPCAST and UNROLL axes it varies with, the lane axes (Expand's vectors,
  codegen/expand.py) aside, and the copies an epilogue loop runs in turn (codegen/epilogue.py: such an epilogue is
  written once);
- times, where it varies with a lane axis, the vector registers its lanes fill (a vector counts as one operation
  for each VECTOR_BYTES it holds), or every lane where Instruction Selection must split it: a load or store whose
  lanes do not address consecutive elements (a gather), a math function the dialect has no vector form of.

`wide` is the part of those operations on vectors wider than VECTOR_BYTES, the values inside decompositions
included (a float32 Sin's lanes held in float64), of `vector`, the operations on vectors: the C compiler splits a
vector wider than its registers, and a body made mostly of such vectors (16 lanes of float64) compiled 30 times
slower than 8 lanes and ran 4 times slower (an elementwise chain with sines), where a few wide values among many
narrow ones (Threefry's 64-bit counter among its 32-bit rounds) cost nothing.
"""

from __future__ import annotations

import math
from functools import cache
from typing import NamedTuple

from uopviz.codegen.decompositions import decompose
from uopviz.codegen.epilogue import looped_epilogues
from uopviz.codegen.expand import EXPANDED, lane_axes
from uopviz.codegen.group_reduce import free_by_node
from uopviz.dtype import DType, dtypes
from uopviz.uop.ops import GroupOp, Ops, UOp
from uopviz.uop.pattern import graph_rewrite, unrecorded
from uopviz.uop.symbolic import step

VECTOR_BYTES = 64  # the widest vector register of the CPUs the C dialect targets (AVX-512: 16 floats, 8 doubles)
_COUNTED = GroupOp.Elementwise | {Ops.LOAD, Ops.STORE, Ops.REDUCE}
_SPLIT_ALWAYS = frozenset({Ops.IDIV, Ops.MOD})  # integer division by other than a power of two goes lane by lane


class CodeSize(NamedTuple):
    """`ops`: the operations Expand and Instruction Selection write; `vector`: those on vectors; `wide`: those on
    vectors wider than VECTOR_BYTES (see the module's doc)."""

    ops: int
    vector: int = 0
    wide: int = 0


def code_size(ast: UOp, native: frozenset[Ops], vector_functions: frozenset[Ops], vectors: bool,
              private_memory: int = 0) -> CodeSize:
    """The size of an optimized kernel's code (before Expand) on a target computing `native` ops itself, with
    `vector_functions` in vector form, vector types where `vectors`, and `private_memory` bytes for the arrays of
    epilogue loops."""
    lanes = lane_axes(ast) if vectors else frozenset()
    free = free_by_node(ast)
    looped: dict[UOp, frozenset[UOp]] = {u: frozenset(e.copies) for e in
                                          looped_epilogues(ast, lane_axes(ast), private_memory) for u in e.nodes}
    ops = vector = wide = 0
    for u in ast.toposort():
        if u.op not in _COUNTED or u.dtype == dtypes.index:
            continue
        fs = free[u] - looped.get(u, frozenset())
        copies = math.prod(_size(r) for r in fs if r.arg.type in EXPANDED and r not in lanes)
        n = math.prod(_size(r) for r in fs if r in lanes)
        c = _cost(u.op, _value_dtype(u), tuple(s.dtype for s in u.src), native, vector_functions)
        if n > 1 and (not c.vector or not _consecutive(u, fs & lanes)):
            ops += c.ops * copies * n
        elif n > 1:
            ops += c.ops * copies * -(-n * c.itemsize // VECTOR_BYTES)  # the registers its lanes fill
            vector += c.ops * copies
            wide += sum(k for size, k in c.by_itemsize if n * size > VECTOR_BYTES) * copies
        else:
            ops += c.ops * copies
    return CodeSize(ops, vector, wide)


def executed_ops(ast: UOp, native: frozenset[Ops]) -> int:
    """The operations an optimized kernel executes, counted per element: each value's cost (its decomposition's
    size where the target lacks the op, as code_size counts it) times the iterations of the ranges it varies with
    (a Reduce's: its source's), vectors and copies aside. What an iteration costs, which the iterations alone do
    not say: a softmax's exp is some thirty operations an element, a copy's body two."""
    free = free_by_node(ast)
    total = 0
    for u in ast.toposort():
        if u.op not in _COUNTED or u.dtype == dtypes.index:
            continue
        ranges = free[u.src[0]] if u.op is Ops.REDUCE else free[u]
        c = _cost(u.op, _value_dtype(u), tuple(s.dtype for s in u.src), native, frozenset())
        total += c.ops * math.prod(_size(r) for r in ranges)
    return total


def _size(r: UOp) -> int:
    return int(r.src[0].arg.value) if r.src[0].op is Ops.CONST else 1


def _value_dtype(u: UOp) -> DType:
    return u.src[1].dtype if u.op is Ops.STORE else u.dtype


def _consecutive(u: UOp, lanes: frozenset[UOp]) -> bool:
    """Whether a load's or store's lanes address consecutive elements, or all one (anything else is a gather or
    a scatter, one access a lane); true for any other value."""
    if u.op not in (Ops.LOAD, Ops.STORE) or u.src[0].op is not Ops.INDEX or len(u.src[0].src) < 2:
        return True
    addr = u.src[0].src[1]
    return all(step(addr, r) in (0, 1) for r in lanes)


class _Cost(NamedTuple):
    """One op's operations, the widest itemsize among them, how many there are of each itemsize, and whether it
    stays a vector."""

    ops: int
    itemsize: int
    by_itemsize: tuple[tuple[int, int], ...]
    vector: bool


@cache
def _cost(op: Ops, dtype: DType, srcs: tuple[DType, ...], native: frozenset[Ops],
          vector_functions: frozenset[Ops]) -> _Cost:
    """The cost of one op on values of these dtypes: the nodes of its decomposition where the target lacks it (of
    the dtypes they compute in: a float32 Sin's are mostly float64), one op otherwise; a native math function
    without a vector form goes lane by lane."""
    itemsize = max((d.itemsize for d in (dtype, *srcs) if d != dtypes.index), default=1)
    if op in _SPLIT_ALWAYS or op not in GroupOp.Decomposed or op in native:
        vector = op not in _SPLIT_ALWAYS and (op not in GroupOp.Decomposed or op in vector_functions)
        return _Cost(1, itemsize, ((itemsize, 1),), vector)
    leaves = tuple(UOp.param(i, (), d) for i, d in enumerate(srcs))
    with unrecorded():
        out = graph_rewrite(UOp(op, leaves), decompose(native))
    sizes = [max(x.dtype.itemsize, 1) for x in out.toposort()
             if x.op not in (Ops.PARAM, Ops.CONST, Ops.STACK) and x.dtype != dtypes.index] or [itemsize]
    by = tuple((k, sizes.count(k)) for k in sorted(set(sizes)))
    return _Cost(len(sizes), max(sizes), by, True)
