"""Software prefetch: a load whose address jumps further than the hardware prefetchers follow is fetched ahead.

A CPU's prefetchers learn streams: the L2 streamer follows sequential lines but never crosses a 4 KiB page, and
the L1's stride prefetcher follows a load's constant stride only up to about 2 KiB. Two loop shapes of this
compiler's kernels defeat both, and each gets one `Prefetch(Index(buf, address))` per cache line it will need:

(a) The innermost loop itself strides far: the heuristic's matmul tile reads three vectors of B's row k at each
    step of the k loop, and B's rows are a row's bytes apart (4000 for 1000 columns), so each step lands on a new
    page. The lines the loop reads DISTANCE iterations later are prefetched in this one.
(b) The inner loop walks a contiguous region (a line or more per iteration, no holes) and the loop around it jumps
    far to the next region: a row kernel's loops read row r, then row r+1 starts cold on a new page. The inner
    loop prefetches the line it reads, one row on (the enclosing loop's next iteration), so the next row's lines
    are requested one per iteration, spread over the loop, not all at once. Where several loops walk the same
    region (softmax's max, sum and output loops), only the one with the most work per iteration does, which
    leaves the most time for the lines to arrive. A lone loop whose next region starts where it stopped
    (an elementwise kernel's rows, back to back) is one long stream the hardware follows, and gets none; so does
    a region larger than half the L1 (a split sum's 256 KiB rows), which would not stay there until read, and a
    loop that steps less than half a line per iteration, which would prefetch each line several times.

Loads are grouped by buffer and loop when their addresses differ by constants only (a tile's vectors, a padded
edge's gathered lanes, which are read here as the vector they would be without the edge's clamp), and each group
gets one prefetch per line it touches. A prefetch never faults (GCC's and Clang's `__builtin_prefetch`, x86's
PREFETCHh), so one past the last row or column needs no gate; it only costs a fetch nobody reads.

It runs last in Instruction Selection, after `hardware ids`: loops are explicit, vectors are the target's, and a
THREAD axis is the `tidx` argument (not a loop to prefetch along). A target opts in with `Target.prefetch`, the
stride its prefetchers still follow; a dialect without a spelling (`Dialect.prefetch` None) would skip the op.
"""

from __future__ import annotations

from uopviz.codegen.devectorize import first_choices
from uopviz.codegen.group_reduce import free_by_node
from uopviz.codegen.lanes import width
from uopviz.target import Target
from uopviz.uop.ops import Ops, UOp
from uopviz.uop.symbolic import affine, moves_evenly

DISTANCE = 8
"""Iterations ahead that rule (a) prefetches: gemm 1000 by hand ran 267-275 GFLOP/s without and 293-295 with 4 or
8, 287 with 16 and 286 with 32 (2-core Sapphire Rapids): far enough for DRAM's latency at one k step's work,
near enough that the lines are still in L1 when read."""
MAX_LINES = 8
"""Lines one group of loads may prefetch per iteration; a group spread wider (rows of A read as scalars) is left
to the hardware: that many prefetches would cost more issue slots than the misses they hide."""

Group = tuple[UOp, UOp, list[tuple[UOp, int, int]]]  # the Index's buffer, the loop, (address, offset, width) each


def prefetch(sink: UOp, target: Target) -> UOp:
    """sink with Prefetch ops in the loops whose global loads jump further than target.prefetch bytes per
    iteration, or whose enclosing loop does (unchanged where the target has none, or nothing qualifies)."""
    if target.prefetch <= 0 or target.l1 is None:
        return sink
    nodes = sink.toposort()
    free = free_by_node(sink)
    end_of = {u.src[1]: u for u in nodes if u.op is Ops.END}
    enclosing = {r: free[e] for r, e in end_of.items()}  # the ranges open around each loop
    groups: dict[tuple[UOp, UOp, frozenset[tuple[UOp, int]]], Group] = {}
    memo: dict[UOp, UOp] = {}  # the addresses' simplification, shared (they share most of their terms)
    for u in nodes:
        if u.op is not Ops.LOAD or u.src[0].op is not Ops.INDEX or u.src[0].src[0].memory().op is not Ops.PARAM:
            continue
        idx = u.src[0]
        vector = bool(idx.shape)
        addr = first_choices(idx.src[1].src[0] if vector else idx.src[1], [], memo)
        loops = [r for r in free[idx] if r in enclosing]
        if not loops:
            continue
        loop = max(loops, key=lambda r: len(enclosing[r]))
        terms, offset = affine(addr)
        key = (idx.src[0], loop, frozenset(terms.items()))
        groups.setdefault(key, (idx.src[0], loop, []))[2].append((addr, offset, width(idx) if vector else 1))
    ahead: dict[UOp, list[UOp]] = {}  # loop -> its prefetches
    nexts: dict[tuple[UOp, UOp, frozenset[tuple[UOp, int]]], list[tuple[int, UOp, list[UOp], bool]]] = {}
    for (buf, loop, terms_key), (_, _, reads) in groups.items():
        terms = dict(terms_key)
        if not moves_evenly(terms, loop):
            continue
        size = buf.memory().arg.dtype.itemsize
        line = target.l1.line // size  # elements per cache line
        lo = min(off for _, off, _ in reads)
        lines = sorted({k for _, off, w in reads for k in range((off - lo) // line, (off - lo + w - 1) // line + 1)})
        if len(lines) > MAX_LINES:
            continue
        base, off0, _ = reads[0]
        step = terms.get(loop, 0)
        trips = loop.src[0].arg.value if loop.src[0].op is Ops.CONST else 0
        if abs(step) * size >= target.prefetch and trips > DISTANCE:
            ahead.setdefault(loop, []).extend(_lines(buf, base, step * DISTANCE + lo - off0, lines, line))
            continue
        outer = max(enclosing[loop], key=lambda r: len(enclosing[r]), default=None)
        span = max(off + w for _, off, w in reads) - lo
        if outer is None or step != span or 2 * span < line or not moves_evenly(terms, outer) \
                or abs(terms.get(outer, 0)) * size < target.prefetch or trips * step * size > target.l1.size // 2:
            continue
        work = sum(1 for n in end_of[loop].src[0].toposort() if loop in free.get(n, ()))
        region = frozenset((t, c) for t, c in terms_key if t is not loop)
        nexts.setdefault((buf, outer, region), []).append(
            (work, loop, _lines(buf, base, terms[outer] + lo - off0, lines, line), terms[outer] == trips * step))
    for candidates in nexts.values():
        _, loop, pfs, onward = max(candidates, key=lambda c: c[0])
        if len(candidates) > 1 or not onward:  # one loop walking on where it stopped is one stream: no cold start
            ahead.setdefault(loop, []).extend(pfs)
    for loop, pfs in ahead.items():  # found again by its range: each rewrite rebuilds the loops around it
        end = next(u for u in sink.toposort() if u.op is Ops.END and u.src[1] is loop)
        body = end.src[0].src if end.src[0].op is Ops.GROUP else (end.src[0],)
        sink = sink.substitute({end: UOp(Ops.GROUP, (*body, *pfs)).end(loop)})
    return sink


def _lines(buf: UOp, base: UOp, shift: int, lines: list[int], line: int) -> list[UOp]:
    """A Prefetch of each line (counted from the group's lowest address) at base + shift."""
    return [UOp(Ops.PREFETCH, (buf.index(base + (shift + k * line)),)) for k in lines]
