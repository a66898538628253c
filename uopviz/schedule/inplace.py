"""Whether an assign may compute its values straight into their targets' buffers.

An assign whose values read the targets it writes (an optimizer's p ← p − lr·m̂/(√v̂ + ε), m ← β·m + (1 − β)·g) must
give each value the targets' old contents. Computing every value into new memory and copying it over is always right,
but costs a copy kernel per target: an AdamW step of a 28-parameter GPT ran 168 kernels where 84 compute. Writing in
place is right when no kernel can read a target's old contents after its new ones are written:

- a target's buffer is read, outside the value assigned to it, by no value (another value's kernel may run after
  the target's; within the value assigned to it, every kernel that reads it runs before or is the one that writes
  it, since the kernel split stores each assigned value once and its readers load it);
- within its own value, only through the target itself (the whole buffer in the target's shape) and along an
  elementwise path, so each element is read by the kernel that writes it, at the index it writes, before it writes
  it (a reduction or a view would read other elements, which another thread or iteration may have written).

A value may read another assigned value: that is its new contents by the graph's meaning, and the kernel split loads
it from the buffer its kernel wrote, or, where both share a kernel (split.siblings: elementwise at the same index),
computes it from that value's expression, whose loads of its own target are the very nodes its Store of that target
depends on. So in a kernel of several targets every load of target t's element i feeds t's Store of element i and
comes before it by data dependency, whatever order the lowering gives the independent Stores; a value that reads
another target's old contents is not written in place (above), and the kernel split puts no value in a kernel with
one that writes a buffer it loads.
"""

from __future__ import annotations

from collections.abc import Sequence

from uopviz.uop.ops import GroupOp, Ops, UOp

_KEEPS_ELEMENTS = GroupOp.Elementwise | GroupOp.Marker
"""Ops whose output element i reads only element i of each source of its own shape."""
_SIZED = frozenset({Ops.RESHAPE, Ops.EXPAND, Ops.PAD, Ops.SHRINK})
"""Ops whose sources after the first are sizes (Stacks of index scalars: constants and bound variables), which read
no buffer, so the walk does not enter them."""


def writes_in_place(targets: Sequence[UOp], values: Sequence[UOp]) -> bool:
    """Whether values (each the new contents of the target beside it: Reshape(Buffer, shape)) may be computed into
    the targets' own buffers in one schedule with the meaning that each reads the targets' old contents."""
    owner = {t: i for i, t in enumerate(targets)}
    buffers = {t.src[0] for t in targets}
    roots = {v: i for i, v in enumerate(values)}
    if len(owner) != len(targets) or len(buffers) != len(targets) or len(roots) != len(values):
        return False  # a buffer written twice, or one value written to two targets: left to new memory
    for i, value in enumerate(values):
        seen: tuple[set[UOp], set[UOp]] = (set(), set())  # nodes met along another path, along an elementwise one
        stack = [(value, True)]
        while stack:
            u, elementwise = stack.pop()
            if u in (met := seen[elementwise]):
                continue
            met.add(u)
            if u in owner:
                if owner[u] != i or not elementwise:
                    return False
                continue
            if u in buffers:
                return False  # a target's buffer through a view other than the target itself
            if u is not value and u in roots:
                continue  # another assigned value: loaded from its buffer once its kernel wrote it
            keeps = elementwise and u.op in _KEEPS_ELEMENTS
            stack += [(s, keeps) for s in (u.src[:1] if u.op in _SIZED else u.src)]
    return True
