"""The default opts for a kernel when the tuning database has none: a few rules a performance engineer applies
first (register-block the innermost output axis, padded to the widest vector where that adds little, unroll the
reduction, each as wide as the target's vectors, a matmul's tile 8 rows high; in a row kernel, where each row's
reductions come before its outputs, vectorize every pass over the row; share a reduction with few outputs among a
work-group; copy a padded row on a CPU in runs whose guards fold (`_pad_runs`); spread the outermost output axis
over the CPU's cores when the work pays for waking them, in as many calls as keep them busy, and a second loop
too where the first alone cannot), checked for legality like any opt, and for code size: no alternative grows the
kernel's code (codegen/opt/size.py's count) past CODE_BUDGET or does its vector work mostly in vectors wider than a
register (`_within_budget`); a narrower one is taken instead. A kernel tiles its outputs only where the tile's rows
share loads (`_tile_shares_loads`). On a target with tensor cores a matmul-like kernel gets TC first
(`_tensor_cores`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from uopviz.codegen.group_reduce import free_ranges
from uopviz.codegen.opt.actions import TC_MODES
from uopviz.codegen.opt.scheduler import MAX_EXPANDED, MAX_THREADS, KernelOptError, Opt, OptOps, Scheduler
from uopviz.codegen.opt.size import CodeSize, code_size, executed_ops
from uopviz.uop.ops import AxisType, Ops, UOp
from uopviz.uop.symbolic import step

OUTPUT = (AxisType.GLOBAL, AxisType.LOOP)
IDLE_SLACK = 0.02  # the share of the cores' time that uneven THREAD calls may leave idle
FEW_CALLS = 64  # the most calls one THREAD split of the heuristic makes
MIN_THREADED = 1 << 18  # iterations (`_work`) below which waking the other cores (some 25 µs) costs more than it saves
MIN_THREADED_OPS = 1 << 22  # operations executed (size.py's `executed_ops`) that pay for waking them however few
PAD_COPIES = (8, 4, 2)  # vectors per run of a padded row the widest vector divides (see _pad_runs)
PAD_SLACK = 16  # a tile axis is padded to the widest vector only where that adds at most 1/16 of its size
WIDE_TILE = 3  # vectors in a row of a CPU's matmul tile (see `_wide_tile`)
FEW_OUTPUTS = 256  # outputs below which a reduction kernel leaves a work-group target's grid mostly idle
SIMT_TILE = 4  # a GPU thread's register tile of a matmul, per side (`_simt_wishes`)
SIMT_BLOCK = 16  # a GPU block of a matmul, threads per side
CONV_ROWS = 12  # rows of an odd convolution tile (see _odd_conv_rows): accumulators to spare in 32 registers
TRANSPOSE_COLUMNS = (8, 4, 2)  # neighbouring columns a transposing copy reads per iteration (`_transposed_tile`)
CODE_BUDGET = 2048  # operations (size.py's count) an opt may grow a kernel's code to; a larger body is not grown


def heuristic_opts(sched: Scheduler) -> list[Opt]:
    """Opts for sched's kernel on its target, in the order they apply."""
    if (tc := _tensor_cores(sched)) is not None:
        return list(tc.opts[len(sched.opts):])
    s = sched
    for choices in _wishes(s):
        s = _first_legal(s, choices)
    s = _first_legal(s, _lines_reused(s))
    s = _first_legal(s, _transposed_tile(s))
    if s.target.threads > 1 and _pays_for_threads(s):  # the outermost output axis shared by the cores
        s = _first_legal(s, _threads(s))
        s = _first_legal(s, _balance(s))
    s = _first_legal(s, _rows_outside(s))
    return list(s.opts[len(sched.opts):])


def _rows_outside(s: Scheduler) -> list[Opt | tuple[Opt, ...]]:
    """A CPU matmul tile whose column strips went outside its row blocks (SWAP, see `_wide_tile`) puts the row
    blocks back outside, within each core's share of the strips, where B's strip is contiguous: B packed into
    panels (schedule/pack.py), so each step of k reads the next vector of each panel and the strip streams from the
    second-level cache at no cost, while a block of A's rows is what the first-level cache is worth keeping across
    the strips (gemm 1024 and 768x3072x768: BEAM found it 6-12% faster). The strip is contiguous where each of its
    vector loads moves by exactly its vector's width per step of k. Empty where that does not apply."""
    if not any(o.op is OptOps.SWAP for o in s.opts):
        return []
    shape, axes = s.shape(), s.axes
    loops = [i for i, (t, n) in enumerate(shape) if t is AxisType.LOOP and n]
    lanes = [i for i, (t, n) in enumerate(shape) if t is AxisType.UPCAST and n]
    reduces = [axes[i] for i, (t, n) in enumerate(shape) if t is AxisType.REDUCE and n]
    if len(loops) < 2 or not lanes or len(reduces) != 1:
        return []
    lane, width = axes[lanes[-1]], shape[lanes[-1]][1]
    strip = [u for u in s.ast.toposort() if u.op is Ops.LOAD and lane in free_ranges(u)]
    if not strip or any(u.src[0].op is not Ops.INDEX or step(u.src[0].src[1], reduces[0]) != width for u in strip):
        return []
    return [Opt(OptOps.SWAP, loops[0], loops[1])]


def _lines_reused(s: Scheduler) -> list[Opt | tuple[Opt, ...]]:
    """An elementwise CPU kernel whose vectors gather their lanes from as many rows of memory (a transpose) walks
    those rows along the loop that moves every such load by one element, innermost (SWAP): each line a lane reads
    then serves the next iterations, where another loop innermost read a new line for every lane of every vector,
    and lines a power-of-two stride apart left the first-level cache first (the GPT step's weight transposes,
    E_L512_L8_u16: 143 -> 11 us; E_L128_L32_u16 39 -> 10 us). Empty where that does not apply."""
    shape, axes = s.shape(), s.axes
    if s.target.global_dims or any(t is AxisType.REDUCE and n for t, n in shape):
        return []
    loops = [i for i, (t, n) in enumerate(shape) if t is AxisType.LOOP and n and n > 1]
    lanes = {axes[i] for i, (t, n) in enumerate(shape) if t is AxisType.UPCAST and n}
    gathers = [u.src[0].src[1] for u in s.ast.toposort() if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and
               any(step(u.src[0].src[1], r) not in (0, 1) for r in lanes & free_ranges(u))]
    if len(loops) < 2 or not gathers:
        return []
    unit = [i for i in loops if all(step(g, axes[i]) == 1 for g in gathers)]
    return [] if not unit or unit[-1] == loops[-1] else [Opt(OptOps.SWAP, unit[-1], loops[-1])]


def _transposed_tile(s: Scheduler) -> list[Opt | tuple[Opt, ...]]:
    """An elementwise CPU kernel whose vectors gather their lanes from as many rows (a transpose: the matmul panels
    of a weight's transpose, schedule/pack.py) and whose innermost loop moves every such load by one element: that
    loop upcast by TRANSPOSE_COLUMNS (the widest that divides it), so one iteration holds that many neighbouring
    columns of the same rows, which devectorize reads as vector loads along the rows and transposes by shuffles
    (codegen/transpose.py; the GPT's panels E_L32_L128_u16 10.9 -> 5.8 us, u4 6.0, u16 6.9). Not where the loads
    are guarded (a Pad's select: the shuffles need plain loads). Empty where that does not apply."""
    shape, axes = s.shape(), s.axes
    nodes = s.ast.toposort()
    if s.target.global_dims or not s.target.vectors or any(t is AxisType.REDUCE and n for t, n in shape) or \
            any(u.op is Ops.WHERE for u in nodes):
        return []
    loops = [i for i, (t, n) in enumerate(shape) if t is AxisType.LOOP and n and n > 1]
    lanes = {axes[i] for i, (t, n) in enumerate(shape) if t is AxisType.UPCAST and n}
    gathers = [u.src[0].src[1] for u in nodes if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and
               any(step(u.src[0].src[1], r) not in (0, 1) for r in lanes & free_ranges(u))]
    if not loops or not gathers or not all(step(g, axes[loops[-1]]) == 1 for g in gathers):
        return []
    return _split(loops[-1], AxisType.UPCAST, TRANSPOSE_COLUMNS)


def _wishes(s: Scheduler) -> list[list[Opt | tuple[Opt, ...]]]:
    """Each wish is a list of alternatives, best first."""
    shape = s.shape()
    out_axes = [i for i, (t, n) in enumerate(shape) if t in OUTPUT and n]
    red_axes = [i for i, (t, n) in enumerate(shape) if t is AxisType.REDUCE and n]
    lanes = tuple(sorted(s.target.vectors, reverse=True)) or (4, 2)  # the widest vectors first
    wishes: list[list[Opt | tuple[Opt, ...]]] = []
    if s.target.simt and (simt := _simt_wishes(s, out_axes, red_axes)):
        return simt
    if out_axes and red_axes and _is_row_kernel(s, out_axes[-1]):  # each pass over a row: a vector per step
        wishes.append(_split(out_axes[-1], AxisType.UPCAST, lanes))
        wishes += [_split(i, AxisType.UNROLL, lanes) for i in red_axes]
    elif len(out_axes) > 1 and red_axes and _tile_shares_loads(s, out_axes):
        # matmul-like, register blocking: each loaded input feeds a tile of outputs
        cols, rows = out_axes[-1], _rows_axis(s, out_axes)
        loops = not s.target.global_dims  # a CPU: one core runs each tile from its own registers and caches
        wishes.append((_wide_tile(cols, shape[cols][1], lanes[0]) if loops else []) +
                      _tile(cols, shape[cols][1], (16, 8, 4, 2)))
        wishes.append(_tile(rows, shape[rows][1], (8, 4, 2)))
        wishes += _odd_conv_rows(s, out_axes, red_axes)
        if loops and rows == out_axes[-2]:  # column strips outside, row blocks inside (see _wide_tile)
            wishes.append([Opt(OptOps.SWAP, rows, cols)])
    elif red_axes and s.target.local_dims and math.prod(shape[i][1] or 1 for i in out_axes) < FEW_OUTPUTS:
        # too few outputs to fill the work grid: a work-group shares each reduction, neighbours reading neighbours
        wishes.append(_split(red_axes[-1], AxisType.GROUP_REDUCE, (16, 8, 4, 2)))
    elif len(out_axes) > 1 and red_axes and not _reads_rows(s, out_axes[-1], red_axes[-1]):
        # each output reads its own data: a vector of neighbouring outputs, no tile
        wishes.append(_split(out_axes[-1], AxisType.UPCAST, lanes))
    elif red_axes and out_axes and _reads_columns(s, out_axes[-1]):
        # a sum down columns (a bias's or a norm's gradient over a batch's rows): neighbouring outputs read
        # neighbouring memory, so a vector of outputs per load, and four of them in flight (the GPT step's
        # r_L384_R8_R4_r16 unrolled the strided reduction instead: BEAM found vectors of outputs 12-27x faster)
        wishes.append(_split(out_axes[-1], AxisType.UPCAST, lanes))
        wishes.append(_split(out_axes[-1], AxisType.UPCAST, (4, 2)))
    elif red_axes:  # reductions along rows: a vector of partial sums in flight
        wishes.append(_split(red_axes[-1], AxisType.UNROLL, lanes))
    elif out_axes:  # elementwise: a vector of neighbours per iteration (a stored pad's rows: runs, see _pad_runs)
        wishes.append(_pad_runs(s, out_axes[-1], lanes) + _split(out_axes[-1], AxisType.UPCAST, lanes))
    return wishes


def _simt_wishes(s: Scheduler, out_axes: list[int], red_axes: list[int]) -> list[list[Opt | tuple[Opt, ...]]]:
    """A GPU's wishes (`Target.simt`), empty where the general rules serve it. A matmul-like kernel: a block of
    SIMT_BLOCK x SIMT_BLOCK threads, each a SIMT_TILE x SIMT_TILE register tile, so the block's loads of a k step
    feed (SIMT_BLOCK * SIMT_TILE)^2 products from the first-level cache, neighbouring threads on neighbouring
    columns (fp32 gemm 4096 on an H200: the CPU's 2 x 16 tile without blocks ran 68 ms, slower than no opts at all,
    26 ms). A long reduction: shared by a work-group (GROUP_REDUCE, the threads on neighbouring elements, then a
    few in flight per thread), so the grid has threads enough and each warp reads whole lines (the zoo's sum of 16M
    floats, split into 256 partial sums, ran as 256 threads: 8.9 ms, 7.5 GB/s)."""
    shape = s.shape()
    if len(out_axes) > 1 and red_axes and _tile_shares_loads(s, out_axes):
        cols, rows = out_axes[-1], _rows_axis(s, out_axes)
        blocks = (SIMT_BLOCK, 8, 4, 2)
        return [_tile(cols, shape[cols][1], (SIMT_TILE, 2)), _tile(rows, shape[rows][1], (SIMT_TILE, 2)),
                _split(cols, AxisType.LOCAL, blocks), _split(rows, AxisType.LOCAL, blocks)]
    if not red_axes:
        return []
    inner, size = red_axes[-1], shape[red_axes[-1]][1] or 0
    groups = [g for g in (256, 128, 64, 32) if size % g == 0 and size // g >= 4]
    if not groups:
        return []
    # the GROUP_REDUCE axis goes before the reduction's remainder, which is then at inner + 1
    return [[(Opt(OptOps.SPLIT, inner, (g, AxisType.GROUP_REDUCE, False)),
              Opt(OptOps.SPLIT, inner + 1, (4, AxisType.UNROLL, False))) for g in groups] +
            _split(inner, AxisType.GROUP_REDUCE, tuple(groups))]


def _pad_runs(s: Scheduler, axis: int, lanes: tuple[int, ...]) -> list[Opt | tuple[Opt, ...]]:
    """A CPU kernel that stores one load guarded by a Pad's bounds (schedule/pads.py's copy, or any realized Pad)
    whose innermost axis the widest vector does not divide (a convolution's padded rows, 32 + 2): UPCAST splits of
    that axis into runs as long as possible (its divisors up to MAX_EXPANDED and longer than a vector that divides
    it, longest first). A lane's guard then folds to a constant wherever the lane cannot reach the Pad's edge (in 2
    runs of 17, all lanes but the first and the last), and the C compiler vectorizes the plain copies between,
    where vectors of 2 kept a guard on every element (conv2d 8x32x32x32's pad kernel ran 1.7x faster). Where the
    widest vector divides the axis: runs of PAD_COPIES of those vectors, so one loop step covers a Pad's piece (the
    GPT step's concatenations, 384 = 3 x 128: each lane's guard `r2*128 + k < 128` reads `r2 < 1`, the same in
    every lane, and a transposed piece's gather ran 1.75x faster; the contiguous pieces as fast as one vector).
    Empty for any other kernel."""
    size = s.shape()[axis][1]
    stores = [u for u in s.ast.toposort() if u.op is Ops.STORE]
    if s.target.global_dims or not size or len(stores) != 1:
        return []
    if not _guarded_load(stores[0].src[1], s.axes[axis]):
        return []
    if size % lanes[0] == 0:  # runs of PAD_COPIES widest vectors, whose lanes' guards and divisions fold alike
        v = lanes[0]
        return [(Opt(OptOps.SPLIT, axis, (v, AxisType.UPCAST, False)),
                 Opt(OptOps.SPLIT, axis, (k, AxisType.UPCAST, False))) for k in PAD_COPIES if size // v % k == 0]
    vector = max((k for k in lanes if size % k == 0), default=1)  # the widest vector that divides it
    return _split(axis, AxisType.UPCAST, tuple(k for k in range(min(size, MAX_EXPANDED), vector, -1) if size % k == 0))


def _guarded_load(value: UOp, r: UOp) -> bool:
    """Whether value is Where(valid, Load, constant) with valid varying with range r: a Pad's read along r."""
    return (value.op is Ops.WHERE and value.src[1].op is Ops.LOAD and value.src[2].op is Ops.CONST and
            r in free_ranges(value.src[0]))


def _first_legal(s: Scheduler, choices: list[Opt | tuple[Opt, ...]]) -> Scheduler:
    """s with the first alternative that applies and keeps the code within budget (`_within_budget`); s itself if
    none does."""
    before: CodeSize | None = None
    for want in choices:
        try:
            t = _applied(s, want)
        except KernelOptError:
            continue
        if not _expands(want):  # THREAD, LOCAL, SWAP: the same code
            return t
        before = before or _size(s)
        if _within_budget(before, _size(t)):
            return t
    return s


def _expands(want: Opt | tuple[Opt, ...]) -> bool:
    """Whether an alternative makes UPCAST or UNROLL axes (what Expand copies or vectorizes)."""
    return any(o.op is OptOps.SPLIT and o.arg[1] in (AxisType.UPCAST, AxisType.UNROLL)
               for o in (want if isinstance(want, tuple) else (want,)))


def _within_budget(a: CodeSize, b: CodeSize) -> bool:
    """Whether an alternative, of code size b where the kernel was of a (size.py), keeps the code within CODE_BUDGET
    operations, or at most as large as it was where the body alone is larger (an 80-op elementwise chain may still
    be vectorized, not copied), and does most of its vector work in vectors no wider than a register (VECTOR_BYTES).
    Expand copies the body once per UPCAST x UNROLL index and splits lanes that cannot stay vectors, so a wide upcast
    of a body with expensive decompositions made hundreds of kilobytes of C: a float32 chain of 30 ops with sines got
    16 lanes (the sines in float64: vectors of 128 bytes) and compiled for 18 s, where 8 lanes compile in 2 s and run
    4x faster."""
    if 2 * b.wide > b.vector and b.wide > a.wide:
        return False
    return b.ops <= max(CODE_BUDGET, a.ops)


def _size(s: Scheduler) -> CodeSize:
    t = s.target
    return code_size(s.ast, t.native, t.vector_functions, bool(t.vectors), t.private_memory)


def _tile_shares_loads(s: Scheduler, out_axes: list[int]) -> bool:
    """Whether a register tile of outputs reuses its loads: some output axis besides the innermost varies with no
    load that the innermost varies with (a matmul's rows, which all read each vector of B's row; `_rows_axis`).
    Where every such load varies with every output axis, each output reads its own data (a row reduction per output:
    layernorm's backward sums 512 rows of 128 floats) and a tile only copies the body for each row of the tile: the
    GPT step's 16 such kernels were upcast 256-fold (r_L2_R128_u8_u2_u16, some 1,000 operations each) and ran
    1.2-2.8x slower than a vector of 16 outputs alone (`_wishes`)."""
    axes, loads = s.axes, _summed_loads(s, out_axes[-1])
    return any(not any(axes[i] in free_ranges(u) for u in loads) for i in out_axes[:-1])


def _summed_loads(s: Scheduler, inner: int) -> list[UOp]:
    """The loads inside the reduction that output axis `inner` moves: those a tile or a vector of outputs reads again
    at every step of the sum. Loads outside it (an epilogue's: a stored pre-activation, a bias) are read once per
    output whatever the tile, so they decide nothing."""
    lane = s.axes[inner]
    summed = {s.axes[i] for i, (t, n) in enumerate(s.shape()) if t is AxisType.REDUCE and n}
    return [u for u in s.ast.toposort()
            if u.op is Ops.LOAD and lane in (ranges := free_ranges(u)) and not summed.isdisjoint(ranges)]


def _threads(s: Scheduler) -> list[Opt | tuple[Opt, ...]]:
    """THREAD splits of the outermost output axis as the other opts left it (a tile's rows padded and split); where
    a later output loop can balance the calls (`_balance`), the split may leave that to it."""
    shape, cores = s.shape(), s.target.threads
    out_axes = [i for i, (t, n) in enumerate(shape) if t in OUTPUT and n]
    if not out_axes:
        return []
    later = [n for t, n in shape[out_axes[0] + 1:] if t is AxisType.LOOP and n]

    def balances_later(k: int) -> bool:
        return any(_balanced(k * j, cores) for n in later for j in _factors(n, 2, MAX_THREADS // k))
    return _split(out_axes[0], AxisType.THREAD, thread_factors(shape[out_axes[0]][1] or 1, cores, balances_later),
                  top=True)


def thread_factors(size: int, cores: int, balances_later: Callable[[int], bool] | None = None) -> tuple[int, ...]:
    """THREAD splits of an axis of `size` for `cores`, best first: the factors that divide it (up to FEW_CALLS
    calls). Those that keep the cores busy (`_balanced`), alone or after a second split of a later loop
    (balances_later), first, nearest to four calls a core (the cores take calls as they finish, so a core slowed
    by other work takes fewer; and a call keeps several of a matmul's column strips, so each block of A's rows it
    reads serves all of them); then the busiest (calls / (rounds x cores): 25 calls on 2 cores keep them 96% busy,
    5 calls 83%), nearest to four calls a core."""
    def key(k: int) -> tuple[bool, float, int]:
        ok = _balanced(k, cores) or (balances_later is not None and balances_later(k))
        return (not ok, 0.0 if ok else -_busy(k, cores), abs(k - 4 * cores))
    return tuple(sorted(_factors(size, cores, FEW_CALLS), key=key))


def _balance(s: Scheduler) -> list[Opt | tuple[Opt, ...]]:
    """A second THREAD split, of another output loop, where the first left the cores unbalanced (gemm 1000's 21
    column strips as 7 calls of 3: split each call's 125 row blocks in 25 and the 175 calls keep both cores 99%
    busy, where 21 calls of one strip left one core idle 5% of the run; measured 3-4% faster than 21 x 5 calls of
    one strip and 10% faster than 21). The fewest calls that balance the cores first, else the busiest, within
    MAX_THREADS."""
    shape, cores = s.shape(), s.target.threads
    calls = math.prod(n or 1 for t, n in shape if t is AxisType.THREAD)
    if calls < 2 or _balanced(calls, cores):
        return []
    splits = [(i, k) for i, (t, n) in enumerate(shape) if t is AxisType.LOOP and n
              for k in _factors(n, 2, MAX_THREADS // calls)]

    def rank(split: tuple[int, int]) -> tuple[bool, float]:
        n = calls * split[1]
        return (False, n) if _balanced(n, cores) else (True, -_busy(n, cores))
    return [Opt(OptOps.SPLIT, i, (k, AxisType.THREAD, True)) for i, k in sorted(splits, key=rank)]


def _factors(n: int, least: int, most: int) -> list[int]:
    """The factors of n from least to most: the ways a THREAD split can cut an axis of n."""
    return [k for k in range(least, min(n, most) + 1) if n % k == 0]


def _busy(calls: int, cores: int) -> float:
    """The share of the cores' time in use when `calls` equal calls are shared by `cores`: calls / (rounds x cores)."""
    return calls / (math.ceil(calls / cores) * cores)


def _balanced(calls: int, cores: int) -> bool:
    """Whether `calls` leave the cores idle at most IDLE_SLACK of the time."""
    return _busy(calls, cores) >= 1 - IDLE_SLACK


def _pays_for_threads(s: Scheduler) -> bool:
    """Whether the kernel's work pays for waking the other cores: iterations enough (`_work`, MIN_THREADED), or
    operations enough (MIN_THREADED_OPS) where each iteration costs many. The GPT step's softmax backward
    recomputes exp, some 40 operations an element over 131,072 iterations (4.7-6.0 M operations: 66-141 us on one
    core, 57-76 us on 2), and its cross-entropy's logsumexp 4.5 M (38 -> 17 us), where the iterations alone left
    them on one core; its layernorm rows of 1-1.5 M operations (20-26 us) gained nothing from the second."""
    t = s.target
    return _work(s) >= MIN_THREADED or executed_ops(s.ast, t.native) >= MIN_THREADED_OPS


def _work(s: Scheduler) -> int:
    """Iterations of the kernel's innermost bodies: each reduction's (over the ranges its value varies with and
    its own) and the stores', added up, as loops that follow each other add (a row kernel's passes) and nested
    ones multiply."""
    def iterations(ranges: frozenset[UOp]) -> int:
        return math.prod(int(r.src[0].arg.value) if r.src[0].op is Ops.CONST else 1 for r in ranges)
    nodes = s.ast.toposort()
    reduces = [u for u in nodes if u.op is Ops.REDUCE]
    stores = [u for u in nodes if u.op is Ops.STORE]
    return sum(iterations(free_ranges(u.src[0])) for u in reduces) + \
        sum(iterations(free_ranges(u.src[0])) for u in stores)  # a store's address varies with its loops


def _rows_axis(s: Scheduler, out_axes: list[int]) -> int:
    """The output axis a matmul-like tile's rows run along: the innermost (the vector axis aside) that no load
    varying with the vector axis varies with, so each vector loaded feeds every row (B's row in a matmul; in a
    convolution the input's, shared by the output channels, not the next output row, which needs other inputs);
    else the second innermost."""
    free = _shared_axes(s, out_axes)
    return free[-1] if free else out_axes[-2]


def _shared_axes(s: Scheduler, out_axes: list[int]) -> list[int]:
    """The output axes (the vector axis aside) that no load varying with the vector axis varies with."""
    axes, loads = s.axes, _summed_loads(s, out_axes[-1])
    return [i for i in out_axes[:-1] if not any(axes[i] in free_ranges(u) for u in loads)]


def _odd_conv_rows(s: Scheduler, out_axes: list[int], red_axes: list[int]) -> list[list[Opt | tuple[Opt, ...]]]:
    """A convolution's tile (three reduce axes or more) whose rows no tile of 8, 4 or 2 divides (the weight
    gradient of an RGB stem: 3 input channels): the rows as one UPCAST of all of them, and the odd axes beside them
    that no load of a vector varies with either (the kernel window's, 3) while the tile stays within CONV_ROWS
    rows, so each vector loaded feeds a row of FMAs (stem dW 3x16x3x3: 3 x 3 rows ran 0.55 -> 0.21 ms, the
    vector feeding one FMA per load before). Empty for any other kernel."""
    if len(red_axes) < 3:
        return []
    shape, rows = s.shape(), 1
    wishes: list[list[Opt | tuple[Opt, ...]]] = []
    for i in reversed(_shared_axes(s, out_axes)):
        n = shape[i][1]
        if not n or n % 2 == 0 or rows * n > CONV_ROWS:
            break
        wishes.append([Opt(OptOps.SPLIT, i, (n, AxisType.UPCAST, False))])
        rows *= n
    return wishes


def _reads_columns(s: Scheduler, inner: int) -> bool:
    """Whether every load inside the reduction that the innermost output axis moves moves by one element along it
    and by other than one along each summed axis (a column of a row-major matrix per output), and there is one. A
    load that stays put along a summed axis is a column too, read again: the GPT step's layernorm weight and bias
    gradients sum over batch and time a residual stream whose position embedding is the same for every batch
    (r_L128_R8_R4_r16 unrolled the strided sum: 77-115 us, 7-11 us with vectors of outputs)."""
    lane, loads = s.axes[inner], _summed_loads(s, inner)
    summed = [s.axes[i] for i, (t, n) in enumerate(s.shape()) if t is AxisType.REDUCE and n]
    return bool(loads) and all(u.src[0].op is Ops.INDEX and step(u.src[0].src[1], lane) == 1
                               and all(step(u.src[0].src[1], a) != 1 for a in summed) for u in loads)


def _reads_rows(s: Scheduler, inner: int, summed: int) -> bool:
    """Whether every load inside the reduction that the innermost output axis moves moves by one element along the
    innermost summed axis and by more along that output axis, and there is one: each output sums a row of its own
    in memory, so a vector of neighbouring outputs would gather a lane from each of 16 rows at every step, where a
    vector along the row is one load (the GPT step's 20 row sums of a layernorm's and softmax's backward,
    r_L8_L4_R128_u16: 20-31 us with vectors of outputs, 5-8 us with the sum unrolled 16 wide, `_wishes`'s last
    rule for reductions)."""
    lane, row, loads = s.axes[inner], s.axes[summed], _summed_loads(s, inner)
    return bool(loads) and all(u.src[0].op is Ops.INDEX and step(u.src[0].src[1], row) == 1 and
                               (k := step(u.src[0].src[1], lane)) is not None and abs(k) > 1 for u in loads)


def _is_row_kernel(s: Scheduler, inner: int) -> bool:
    """Whether no reduction varies with the innermost output axis: the reductions run over a row before its
    outputs (softmax, layernorm), not inside each output (a matmul)."""
    r = s.axes[inner]
    return all(r not in free_ranges(u) for u in s.ast.toposort() if u.op is Ops.REDUCE)


def _tensor_cores(s: Scheduler) -> Scheduler | None:
    """Where the target has tensor cores and the kernel is a product they compute: TC on the innermost reduce axis
    and pair of output axes whose sizes are multiples of the tile (else the first that padding to it allows), then
    more tiles per warp (UPCAST of the two innermost output axes: each fragment loaded feeds several Wmmas) and
    more warps per block (LOCAL). None where TC does not apply."""
    if not s.target.tensor_cores:
        return None
    reduces = [i for i, (t, n) in enumerate(s.shape()) if t is AxisType.REDUCE and n]
    tc = None
    for want in (Opt(OptOps.TC, i, (-1, pad, mode)) for pad in (0, 1) for i in reversed(reduces) for mode in TC_MODES):
        try:
            tc = s.apply_opt(want)
            break
        except KernelOptError:
            continue
    if tc is None:
        return None
    for which, target, factors in ((-1, AxisType.UPCAST, (4, 2)), (-2, AxisType.UPCAST, (4, 2)),
                                   (-1, AxisType.LOCAL, (2,)), (-2, AxisType.LOCAL, (2,))):
        out_axes = [i for i, (t, n) in enumerate(tc.shape()) if t in OUTPUT and n and n > 1]
        for alt in _split(out_axes[which], target, factors) if len(out_axes) >= -which else ():
            try:
                tc = _applied(tc, alt)
                break
            except KernelOptError:
                continue
    return tc


def _split(axis: int, target: AxisType, factors: tuple[int, ...], top: bool = False) -> list[Opt | tuple[Opt, ...]]:
    return [Opt(OptOps.SPLIT, axis, (k, target, top)) for k in factors]


def _tile(axis: int, size: int | None, factors: tuple[int, ...]) -> list[Opt | tuple[Opt, ...]]:
    """UPCAST splits of a tile axis, widest first; where the widest does not divide the axis, that axis padded to
    it comes next when the padding adds at most 1/PAD_SLACK of the work (1000 columns as 63 vectors of 16, the
    last one masked, run at vector speed where 125 vectors of 8 take twice the loads and FMAs per element)."""
    out = _split(axis, AxisType.UPCAST, factors)
    k = factors[0]
    if size and size % k and (-size % k) * PAD_SLACK <= size:
        out.insert(1, (Opt(OptOps.PADTO, axis, k), Opt(OptOps.SPLIT, axis, (k, AxisType.UPCAST, False))))
    return out


def _wide_tile(axis: int, size: int | None, lanes: int) -> list[Opt | tuple[Opt, ...]]:
    """Tile rows of WIDE_TILE (else 2) vectors, in order of preference: the widths that divide the axis, then those
    it can be padded to, adding at most 1/PAD_SLACK. With 8 rows, 24 accumulators, which with the vectors of B and
    A's broadcast fill a CPU's 32 vector registers (AVX-512), so each loaded row of B feeds 8 FMAs a vector where
    one vector fed 8 (half the loads per FMA). With the column
    loop then outside the row loop (SWAP), the tile's strip of B (K x 48 columns) stays in cache while A's row blocks
    pass: gemm 512, 1000 and 768x3072x768 ran 1.8-4x faster here than with 8 rows of one vector."""
    exact: list[Opt | tuple[Opt, ...]] = []
    padded: list[Opt | tuple[Opt, ...]] = []
    for k in range(WIDE_TILE, 1, -1):
        if not size or size < k * lanes:
            continue
        split = (Opt(OptOps.SPLIT, axis, (lanes, AxisType.UPCAST, False)),
                 Opt(OptOps.SPLIT, axis, (k, AxisType.UPCAST, False)))
        if size % (k * lanes) == 0:
            exact.append(split)
        elif (-size % (k * lanes)) * PAD_SLACK <= size:
            padded.append((Opt(OptOps.PADTO, axis, k * lanes), *split))
    return exact + padded  # a width that divides the axis first: a padded one adds masked edges to every step


def _applied(s: Scheduler, want: Opt | tuple[Opt, ...]) -> Scheduler:
    """s with one alternative of a wish applied: an opt, or opts that go together (all or none)."""
    for opt in want if isinstance(want, tuple) else (want,):
        s = s.apply_opt(opt)
    return s
