"""`uopviz` command line: `demo` (the main job until `serve` lands) and `trace show`."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Sequence

import uopviz
from uopviz.uop.ops import AxisType, Ops, UOp


def gemm_kernel(m: int = 5, n: int = 7, k: int = 3) -> UOp:
    """C[m,n] = A[m,k] @ B[k,n] written by hand, with index math left unsimplified as a front-end would emit it."""
    a, b, c = UOp.param(0, (m * k,)), UOp.param(1, (k * n,)), UOp.param(2, (m * n,))
    i, j = UOp.range(m, 0, AxisType.GLOBAL), UOp.range(n, 1, AxisType.GLOBAL)
    r = UOp.range(k, 2, AxisType.REDUCE)
    flat_a = i * k + r
    a_idx = (flat_a // k) * k + flat_a % k  # a reshape round trip: (i, r) -> flat -> (row, col) -> flat
    b_idx = (r * n + j * 1 + 0) % (k * n)
    acc = (a.index(a_idx).load() * b.index(b_idx).load()).reduce(Ops.ADD, r)
    return UOp.sink(c.index((i * n + j) // 1).store(acc).end(i, j))


def _index_exprs(kernel: UOp) -> list[str]:
    return [u.src[1].render() for u in kernel.toposort() if u.op is Ops.INDEX and u.src[0].op is Ops.PARAM]


def cmd_demo(args: argparse.Namespace) -> int:
    from uopviz.uop.pattern import graph_rewrite
    from uopviz.uop.spec import validate
    from uopviz.uop.symbolic import symbolic

    kernel = validate(gemm_kernel(*args.shape))
    print(f"gemm {args.shape}: {len(kernel.toposort())} nodes; index expressions before simplification:")
    for e in _index_exprs(kernel):
        print("   ", e)
    with uopviz.trace() as tr, uopviz.trace.context("gemm", kind="kernel"), uopviz.trace.stage("Symbolic"):
        out = validate(graph_rewrite(kernel, symbolic, name="simplify index math"))
    print(f"after the 'simplify index math' pass: {len(out.toposort())} nodes")
    for e in _index_exprs(out):
        print("   ", e)
    tr.save(args.out)
    print()
    _summarize(uopviz.trace.load(args.out), args.out)
    return 0


def _summarize(t: uopviz.trace.Trace, path: str) -> None:
    print(f"trace {path}: {len(t.nodes)} distinct nodes")
    for ctx in t.contexts:
        print(f"  context {ctx.name} ({ctx.kind})")
        for p in ctx.passes:
            pad = "  " * p.depth
            print(f"    {pad}{p.stage or '-'} / {p.name}: {len(p.steps)} matches")
            for r, count in Counter(s.rule for s in p.steps).most_common(5):
                rule = t.rules[r]
                print(f"    {pad}  {count:4d} x {rule.location}  {rule.text.splitlines()[0][:70]}")


def cmd_trace_show(args: argparse.Namespace) -> int:
    try:
        t = uopviz.trace.load(args.file)
    except (OSError, uopviz.trace.TraceFormatError) as e:
        print(f"uopviz: {e}", file=sys.stderr)
        return 1
    _summarize(t, args.file)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="uopviz", description="See, change and tune what a tensor compiler does.")
    p.add_argument("--version", action="version", version=f"uopviz {uopviz.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build a gemm kernel by hand, simplify it under the recorder, save the trace")
    demo.add_argument("--out", default="demo.uopviz-trace.json", help="where to save the trace")
    demo.add_argument("--shape", type=int, nargs=3, default=(5, 7, 3), metavar=("M", "N", "K"))
    demo.set_defaults(fn=cmd_demo)
    tr = sub.add_parser("trace", help="work with saved traces").add_subparsers(dest="trace_command", required=True)
    show = tr.add_parser("show", help="summarize a saved trace")
    show.add_argument("file")
    show.set_defaults(fn=cmd_trace_show)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except BrokenPipeError:  # output piped into `head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
