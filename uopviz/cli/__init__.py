"""`uopviz` command line: `serve` (the web UI, the main job), `demo`, `kernels`, `trace show` here; `beam` (beam.py),
`cache` (cache.py), `export` (export.py) and `profile` (profile.py) beside it. The faces of the lower layers: nothing
below imports this package."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Sequence

import uopviz
from uopviz.runtime import device as devices


def cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.runtime.device import DeviceError
    from uopviz.search.policy import default_opts
    from uopviz.tensor import Tensor

    m, n, k = args.shape
    rng = np.random.default_rng(0)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    try:
        A, B = Tensor(a, device=args.device), Tensor(b, device=args.device)
        C = A @ B
        with uopviz.trace.record() as tr:
            got = C.numpy()
        for ast, bufs in kernels_of(schedule([(A @ B).uop])):
            kernel, _ = compile_kernel(ast, bufs[0].arg.device, default_opts(ast, bufs[0].arg.device))
            print(f"kernel {kernel.name} on {C.device}:")
            print(kernel.source or kernel.linear.tree())
    except DeviceError as e:
        print(f"uopviz: {e}", file=sys.stderr)
        return 1
    err = float(np.max(np.abs(got - a @ b)))
    print(f"gemm {m}x{k} @ {k}x{n} on {C.device}: max abs error vs NumPy {err:.3g}")
    tr.save(args.out)
    print()
    _summarize(uopviz.trace.load(args.out), args.out)
    return 0 if err < 1e-3 else 1


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

    from uopviz.kernels import ZOO
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

    from uopviz.compiler import compile_kernel
    from uopviz.kernels import get
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.runtime.device import DeviceError
    from uopviz.search.policy import default_opts
    try:
        z = get(args.name)
        sizes = z.sizes(small=args.small)
        out, arrays = z.build(sizes, args.device)
        graph = schedule([out.uop])
        for ast, bufs in kernels_of(graph):
            kernel, _ = compile_kernel(ast, bufs[0].arg.device, default_opts(ast, bufs[0].arg.device))
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


def cmd_serve(args: argparse.Namespace) -> int:
    from uopviz.backend.serve import serve  # FastAPI and uvicorn load only for this command

    return serve(args.files, host=args.host, port=args.port, db=args.db, browser=not args.no_browser,
                 device=args.device, token=not args.no_token, allow_dirs=args.allow_dir)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="uopviz", description="See, change and tune what a tensor compiler does.")
    p.add_argument("--version", action="version", version=f"uopviz {uopviz.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="lower and run a gemm under the recorder; print its kernel; save the trace")
    demo.add_argument("--out", default="demo.uopviz-trace.json", help="where to save the trace")
    demo.add_argument("--shape", type=int, nargs=3, default=(33, 7, 5), metavar=("M", "N", "K"))
    demo.add_argument("--device", default=None, help=devices.device_help())
    demo.set_defaults(fn=cmd_demo)
    kern = sub.add_parser("kernels", help="list the kernel zoo, or run one kernel and check it against NumPy")
    kern.add_argument("name", nargs="?", help="a zoo kernel to run (omit to list them all)")
    kern.add_argument("--small", action="store_true", help="the small sizes (as the tests use)")
    kern.add_argument("--device", default=None, help=devices.device_help())
    kern.add_argument("--source", action="store_true", help="print each kernel's generated source")
    kern.add_argument("--json", action="store_true", help="the list as JSON")
    kern.set_defaults(fn=cmd_kernels)
    tr = sub.add_parser("trace", help="work with saved traces").add_subparsers(dest="trace_command", required=True)
    show = tr.add_parser("show", help="summarize a saved trace")
    show.add_argument("file")
    show.set_defaults(fn=cmd_trace_show)
    serve = sub.add_parser("serve", help="browse recorded rewrites in the web UI (default: the kernel zoo)")
    serve.add_argument("files", nargs="*", metavar="TRACE_OR_SCRIPT",
                       help="saved .uopviz-trace.json files, and .py scripts to run under the recorder "
                            "(default: record the kernel zoo)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0: any free port)")
    serve.add_argument("--db", default=None,
                       help="tuning database (default: $UOPVIZ_CACHE_DIR/tuning.db, else ~/.cache/uopviz/tuning.db)")
    serve.add_argument("--no-browser", action="store_true", help="do not open a browser")
    serve.add_argument("--device", default=None, help="device to lower the zoo for (default: $UOPVIZ_DEVICE or CPU)")
    serve.add_argument("--allow-dir", action="append", default=[], metavar="DIR",
                       help="let the API load trace files and run .py scripts under DIR (repeatable; the directories "
                            "of the files given are allowed too; default: none)")
    serve.add_argument("--no-token", action="store_true",
                       help="serve the API without the token printed in the URL: any local user can use it")
    serve.set_defaults(fn=cmd_serve)
    from uopviz.cli import beam, cache, export, profile
    cache.add_parser(sub)
    beam.add_parser(sub)
    export.add_parser(sub)
    profile.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except BrokenPipeError:  # output piped into `head`: stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
