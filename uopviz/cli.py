"""`uopviz` command line: `demo` (the main job until `serve` lands), `kernels` (the zoo) and `trace show`."""

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


def cmd_kernels(args: argparse.Namespace) -> int:
    import json

    from kernels import ZOO
    if not args.name:
        rows = [ZOO[n].describe(ZOO[n].sizes(small=args.small)) for n in ZOO]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        print(f"{'kernel':13s} {'sizes':36s} {'GFLOP':>8s} {'MB':>8s}  what")
        for r in rows:
            sizes = ",".join(f"{k}={v}" for k, v in r["sizes"].items())
            print(f"{r['name']:13s} {sizes:36s} {r['flops'] / 1e9:8.3f} {r['bytes'] / 1e6:8.2f}  {r['doc']}")
        return 0
    return _run_zoo_kernel(args)


def _run_zoo_kernel(args: argparse.Namespace) -> int:
    import numpy as np

    from kernels import get
    from uopviz.realize import compile_kernel, kernels_of, schedule
    from uopviz.runtime.device import DeviceError
    try:
        z = get(args.name)
        sizes = z.sizes(small=args.small)
        out, arrays = z.build(sizes, args.device)
        graph = schedule([out.uop])
        for ast, bufs in kernels_of(graph):
            kernel, _ = compile_kernel(ast, bufs[0].arg.device)
            print(f"{kernel.name}  ({len(bufs)} buffers)")
            if args.source:
                print(kernel.source or kernel.linear.tree())
        got = out.numpy()
    except (KeyError, ValueError, DeviceError) as e:
        print(f"uopviz: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 1
    want = z.reference(*arrays)
    ok = np.allclose(got, want, rtol=z.rtol, atol=z.rtol)
    print(f"{z.name} {sizes} on {out.device}: {'matches NumPy' if ok else 'DIFFERS from NumPy'} "
          f"(max abs error {float(np.max(np.abs(got - want))) if got.size else 0.0:.3g})")
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="uopviz", description="See, change and tune what a tensor compiler does.")
    p.add_argument("--version", action="version", version=f"uopviz {uopviz.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build a gemm kernel by hand, simplify it under the recorder, save the trace")
    demo.add_argument("--out", default="demo.uopviz-trace.json", help="where to save the trace")
    demo.add_argument("--shape", type=int, nargs=3, default=(5, 7, 3), metavar=("M", "N", "K"))
    demo.set_defaults(fn=cmd_demo)
    kern = sub.add_parser("kernels", help="list the kernel zoo, or run one kernel and check it against NumPy")
    kern.add_argument("name", nargs="?", help="a zoo kernel to run (omit to list them all)")
    kern.add_argument("--small", action="store_true", help="the small sizes (as the tests use)")
    kern.add_argument("--device", default=None, help="CPU, CL or PYTHON (default: $UOPVIZ_DEVICE or CPU)")
    kern.add_argument("--source", action="store_true", help="print each kernel's generated source")
    kern.add_argument("--json", action="store_true", help="the list as JSON")
    kern.set_defaults(fn=cmd_kernels)
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
