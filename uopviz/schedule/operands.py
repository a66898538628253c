"""Stored operands: a costly value that a matmul reads many times is computed once, into a buffer of its own.

The kernel split fuses elementwise work into the kernel that reads it, which is free when each element is read
once. A matmul's operand is read once per output it is broadcast to: its value, computed in the kernel, is computed
again for every tile of outputs. For a view of memory or a cheap expression that is what a fused kernel should do,
but a training step's operands are often long expressions: the GPT's MLP projection multiplies GELU(x W1 + b) (an
erf, some 45 operations) by W2, and the gradient of the first linear layer of a block reads layernorm's backward
(30 buffers, a square root and its derivative) for each of its 384 output columns. Those kernels ran 5-10x longer
than a matmul of their size. Storing the operand first (one elementwise kernel, one pass over memory) leaves the
matmul plain loads, which `pack` can then lay out.

The pass stores the operand of a sum of products (a Reduce of a Mul of two broadcast values, or of a Where that picks
one, a product by a one-hot: an embedding's gradient sums the rows of the tokens' gradient that pick each entry of
the vocabulary, and recomputed the GPT's LayerNorm backward for every tile of entries) when the work it saves
pays for the store: the Reduce reads each of its elements at least `FEWEST_READS` times, an element costs at least
`COSTLY` operations (`_cost`: each elementwise op 1, each decomposed function `DECOMPOSED`, counted up to values that
are stored anyway: buffers, stored reductions, Contiguous), and the reads times the cost come to at least `REREAD` x
`COSTLY`: 64 reads of 8 operations, or 32 of 16 (attention's probabilities, an exp each, read once per column of
the head: the softmax-times-V kernels of a GPT step computed them again in each of their six launches).
"""

from __future__ import annotations

from uopviz.schedule.program import program_order, stored
from uopviz.schedule.rows import ROW
from uopviz.uop.ops import GroupOp, Ops, UOp, prod

REREAD = 64
"""Reads of each operand element by the matmul (its broadcast) that pay for storing an operand of COSTLY operations."""
COSTLY = 8
"""The fewest operations per element (`_cost`) for an operand to be worth storing (read REREAD times or more)."""
FEWEST_READS = 16
"""Below this many reads of each element an operand stays in the matmul's kernel, however costly: a store is a pass
over memory, and a matmul that reads its operand this few times is small."""
DECOMPOSED = 16
"""What a decomposed function (exp2, log2, sin, sqrt...) counts for: the operations its decomposition takes."""


def store_operands(fn: UOp) -> UOp:
    """Function fn with each costly, much re-read matmul operand made Contiguous (stored); fn unchanged when there
    is none."""
    order = program_order(fn.src[0])
    values = {v for u in order if u.op is Ops.REDUCE for v in _reread_operands(u)}
    return stored(fn, order, values)


def _reread_operands(red: UOp) -> list[UOp]:
    """The computed values below the broadcasts of a sum of products (a Where's values, not its condition) that it
    re-reads FEWEST_READS times or more, that cost COSTLY operations or more an element, reads times cost at least
    REREAD x COSTLY."""
    if red.tag is not None or red.arg.op is not Ops.ADD or red.src[0].op not in (Ops.MUL, Ops.WHERE):
        return []
    out = []
    for x in red.src[0].src[1:] if red.src[0].op is Ops.WHERE else red.src[0].src:
        if x.op is not Ops.EXPAND:
            continue
        v = x.src[0]
        while v.op in GroupOp.Movement:
            v = v.src[0]
        n, m = prod(x.shape), prod(v.shape)
        if not isinstance(n, int) or not isinstance(m, int) or m == 0 or n < FEWEST_READS * m:
            continue
        if v.op in GroupOp.Elementwise and (cost := _cost(v)) >= COSTLY and n // m * cost >= REREAD * COSTLY:
            out.append(v)
    return out


def _cost(v: UOp) -> int:
    """Operations to compute one element of v in the kernel that reads it: its elementwise ops (decomposed ones
    DECOMPOSED each), down to the values a kernel reads from memory (buffers, stored reductions, Contiguous)."""
    seen: set[UOp] = set()
    todo, cost = [v], 0
    while todo:
        u = todo.pop()
        if u in seen:
            continue
        seen.add(u)
        if u.op in GroupOp.Decomposed:
            cost += DECOMPOSED
        elif u.op in GroupOp.ALU:
            cost += 1
        elif not (u.op in GroupOp.Movement or (u.op is Ops.REDUCE and u.tag == ROW)):
            continue  # memory, a stored value, a constant: read, not computed
        todo += u.src
    return cost
