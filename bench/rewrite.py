"""Cost of recording rewrites: symbolic simplification of a 10,000-node index expression, recording off and on.

Prints nodes/s (input nodes per second of graph_rewrite) for both, their ratio (the target is at most 2x), and
the time to serialize the recorded trace, which is paid only when a trace is read or saved. Each run rewrites
a freshly built graph (new variable names and range ids), so no run reuses another's cached node properties.

    python3 bench/rewrite.py [--nodes 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uopviz.trace
from uopviz.dtype import dtypes
from uopviz.uop.ops import UOp, toposort
from uopviz.uop.pattern import graph_rewrite
from uopviz.uop.symbolic import symbolic


def term(i: int, salt: int) -> UOp:
    """One index term full of what the simplifier folds: x*1, x+0, constant chains, divmod of a flat sum."""
    base = (salt * 100_000 + i) * 2
    r0, r1 = UOp.range(32, base), UOp.range(4, base + 1)
    v = UOp.variable(f"v{salt}_{i}", 0, 63)
    c = UOp.const(dtypes.index, i % 17)
    flat = (r0 * 4 + r1) // 4 + (r0 * 4 + r1) % 4        # -> r0 + r1
    noise = (v * 1 + 0) * 2 + (c + 3) * 2 + (r1 % 1)      # -> v*2 + const
    nested = ((v + 5) + 7) * 3 + (r0 // 2) // 4           # constants move outward, divisions merge
    return flat + noise + nested + r0.maximum(0)                # max by bounds -> r0


def build(n_nodes: int, salt: int) -> tuple[UOp, int]:
    """A balanced sum of terms with at least n_nodes nodes (balanced: the graph is wide, not deep)."""
    terms: list[UOp] = []
    count = 0
    while count < n_nodes:
        terms.append(term(len(terms), salt))
        count = len(toposort(terms))
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0], len(toposort(terms))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    graph_rewrite(build(500, 0)[0], symbolic)  # warm up imports and code paths
    off: list[float] = []
    on: list[float] = []
    ser: list[float] = []
    matches = n = 0
    for run in range(args.runs):  # interleaved, so drift in machine speed hits both alike
        g, n = build(args.nodes, 2 * run + 1)
        t0 = time.perf_counter()
        graph_rewrite(g, symbolic, name="symbolic")
        off.append(time.perf_counter() - t0)

        g, n = build(args.nodes, 2 * run + 2)
        with uopviz.trace() as tr:
            t0 = time.perf_counter()
            graph_rewrite(g, symbolic, name="symbolic")
            on.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        doc = tr.to_json()
        ser.append(time.perf_counter() - t0)
        matches = len(tr.passes[0].steps)

    t_off, t_on, t_ser = statistics.median(off), statistics.median(on), statistics.median(ser)
    print(f"symbolic rewrite of a {n}-node index expression ({matches} rule matches), median of {args.runs} runs")
    print(f"  recording off: {n / t_off:12,.0f} nodes/s  ({t_off * 1e3:7.1f} ms)")
    print(f"  recording on:  {n / t_on:12,.0f} nodes/s  ({t_on * 1e3:7.1f} ms)")
    print(f"  on/off time ratio: {t_on / t_off:.2f}x  (target <= 2x)")
    print(f"  to_json of the trace: {t_ser * 1e3:.1f} ms, {len(doc) / 1e6:.2f} MB (paid only when read or saved)")


if __name__ == "__main__":
    main()
