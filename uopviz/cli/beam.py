"""`uopviz beam KERNEL...`: BEAM-search the opts of every kernel of one or more programs and compare the result
with the unoptimized kernels and the heuristic's opts.

KERNEL is a zoo name (`uopviz kernels` lists them; `all` is the whole zoo) or `path.py:function`, a function
returning a lazy Tensor (--shape values are passed to it as keyword arguments). Every kernel the programs' realize
runs is searched; results go to the tuning database, so running the same command again answers from it at once.

`uopviz beam script.py [--budget 5m]` tunes a whole model: it runs the script (a training step, a few steps of a
loop, under @jit or not), times every kernel it ran on the script's own buffers, and searches them most time first
within the budget (uopviz.tune), then prints each kernel's time before and after. Run again, it answers the kernels
already searched from the database and spends the budget on the rest.
Locally the kernels are searched one after another; with --ray the candidates are built and timed on a Ray
cluster (`uopviz ray-resources` says what its nodes advertise), several kernels at once, and this process keeps
the searches and the database.

Exit codes: 0 done; 1 the search could not run (device unavailable, database unusable, the program or the
unoptimized kernel failed); 2 bad usage (unknown kernel or device, bad --shape); 130 interrupted (the candidates
measured so far are stored: the same command resumes).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uopviz.cli.script import ProgramError, UsageError, default_device, fail, positive, run_script
from uopviz.runtime import device as devices
from uopviz.search.db import TuningDBError
from uopviz.search.report import VARIANTS


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `beam` on the `uopviz` command line."""
    p = subparsers.add_parser("beam", help="search the fastest opts for a program's kernels (BEAM)",
                              description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="a zoo kernel name (all: the whole zoo), path.py:function returning a Tensor, or script.py "
                        "(every kernel the script runs: whole-model tuning)")
    p.add_argument("--beam", type=positive, default=4, metavar="N", help="beam width (default: 4)")
    p.add_argument("--rounds", type=positive, default=8, metavar="N", help="at most N rounds (default: 8)")
    p.add_argument("--device", default=None, help=devices.device_help())
    p.add_argument("--shape", type=_shape, action="append", default=[], metavar="NAME=VALUE",
                   help="a size of the zoo kernel (e.g. M=512), or a keyword argument of the function; repeatable")
    p.add_argument("--small", action="store_true", help="the zoo kernel's small sizes (as the tests use)")
    p.add_argument("--budget", type=_duration, default=None, metavar="TIME",
                   help="with a script: the time the whole tuning may take (e.g. 300, 90s, 5m, 1h), shared among its "
                        "kernels by their time (default: every search runs to its end)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--db", metavar="PATH", type=Path,
                   help="the tuning database (default: $UOPVIZ_CACHE_DIR/tuning.db, else ~/.cache/uopviz/tuning.db)")
    p.add_argument("--force", action="store_true", help="search again even where the database has a result")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="build and time on a Ray cluster (ADDRESS as `ray start` printed it, HOST:PORT; default: "
                        "the cluster this machine belongs to); needs the ray extra")
    p.set_defaults(fn=cmd_beam)
    r = subparsers.add_parser("ray-resources", help="the Ray resources a node owning these devices advertises",
                              description="Prints the JSON for `ray start --resources` on a machine whose devices "
                                          "should time BEAM candidates (each device's runtime is started here).")
    r.add_argument("devices", nargs="+", metavar="DEVICE", help="CPU, CL, CUDA or PYTHON")
    r.set_defaults(fn=cmd_ray_resources)


@dataclass
class Program:
    """The lazy result to search and what its work is, for GFLOP/s and GB/s (flops None: unknown)."""

    label: str
    tensor: Any
    flops: int | None
    bytes: int | None


def cmd_beam(args: argparse.Namespace) -> int:
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.runtime import device as devices
    from uopviz.runtime.device import DeviceError, UnknownDeviceError
    from uopviz.search.beam import BeamError, beam_many
    from uopviz.search.db import TuningDB
    from uopviz.search.executor import Executor
    from uopviz.search.ray_executor import RayClusterError, RayUnavailableError
    from uopviz.search.report import report
    docs = []
    executor: Executor | None = None
    scripts = [n for n in args.kernels if n.endswith(".py")]
    if scripts and (len(scripts) > 1 or len(args.kernels) > 1 or args.shape or args.small):
        return fail(UsageError("a script is tuned alone: give one script.py, without other kernels, --shape or "
                                "--small"), 2)
    if args.budget is not None and not scripts:
        return fail(UsageError("--budget applies to a script (whole-model tuning); give script.py"), 2)
    try:
        device = devices.canonical(args.device)
        if args.ray is not None:
            from uopviz.search.ray_executor import RayExecutor
            executor = RayExecutor(args.ray)
        if scripts:
            return _tune_script(args, scripts[0], device, executor)
        programs = [_program(args, name, device) for name in _names(args.kernels)]
        kernels = [kernels_of(schedule([program.tensor.uop])) for program in programs]
        for program, ks in zip(programs, kernels, strict=True):
            if program.bytes is None:
                program.bytes = sum(b.arg.size * b.arg.dtype.itemsize for _, bufs in ks for b in bufs)
        with TuningDB(args.db) as db:  # every kernel of every program in one call: on a cluster they overlap
            results = iter(beam_many([(ast, bufs[0].arg.device) for ks in kernels for ast, bufs in ks], args.beam,
                                     db=db, force=args.force, executor=executor, max_rounds=args.rounds))
        for program, ks in zip(programs, kernels, strict=True):
            rs = [next(results) for _ in ks]
            wall_s = max(r.span[1] for r in rs) - min(r.span[0] for r in rs) if rs else 0.0
            docs.append(report(program.label, device, args.beam, rs, wall_s, program.flops, program.bytes))
    except (UsageError, UnknownDeviceError) as e:
        return fail(e, 2)
    except (ProgramError, TuningDBError, DeviceError, BeamError, RayUnavailableError, RayClusterError, OSError) as e:
        return fail(e, 1)
    except KeyboardInterrupt:
        print("uopviz: interrupted; the candidates measured so far are stored: run the same command to resume",
              file=sys.stderr)
        return 130
    finally:
        if executor is not None:
            executor.close()
    if args.json:
        print(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
    else:
        print("\n\n".join(_table(doc, colour=sys.stdout.isatty()) for doc in docs))
    return 0


def _tune_script(args: argparse.Namespace, script: str, device: str, executor: Any) -> int:
    """Run the script, capturing its launches, and tune them all (whole-model tuning); print the report."""
    from uopviz.realize import capture
    from uopviz.search.db import TuningDB
    from uopviz.tune import runs_of, tune
    with capture() as launches:
        run_script(script, device)
    if not launches:
        raise ProgramError(f"{script} ran no kernel: there is nothing to tune")
    with TuningDB(args.db) as db:
        tuning = tune(runs_of(launches), args.beam, budget_s=args.budget, db=db, executor=executor,
                      max_rounds=args.rounds, force=args.force, scope=f"a run of {Path(script).name}")
    print(json.dumps(tuning.to_json(), indent=2) if args.json else tuning)
    return 0


def cmd_ray_resources(args: argparse.Namespace) -> int:
    from uopviz.runtime.device import DeviceError, UnknownDeviceError
    from uopviz.search.ray_executor import device_resources
    try:
        print(json.dumps(device_resources(args.devices)))
    except UnknownDeviceError as e:
        return fail(e, 2)
    except DeviceError as e:
        return fail(e, 1)
    return 0


def _names(names: list[str]) -> list[str]:
    """The programs asked for, `all` standing for every zoo kernel."""
    if "all" not in names:
        return names
    from uopviz.kernels import ZOO
    return [z for n in names for z in (list(ZOO) if n == "all" else [n])]


def _program(args: argparse.Namespace, name: str, device: str) -> Program:
    shapes = dict(args.shape)
    if ":" in name and name.split(":")[0].endswith(".py"):
        if args.small:
            raise UsageError("--small applies to zoo kernels; give a function its sizes with --shape")
        return _function_program(name, shapes, device)
    from uopviz.kernels import ZOO
    z = ZOO.get(name)
    if z is None:
        raise UsageError(f"no zoo kernel {name!r} (the zoo has: {', '.join(ZOO)}); or give path.py:function")
    try:
        sizes = z.sizes(small=args.small, **shapes)
    except ValueError as e:
        raise UsageError(f"bad --shape: {e}") from None
    out, _ = z.build(sizes, device)
    label = f"{z.name} ({', '.join(f'{k}={v}' for k, v in sizes.items())})"
    return Program(label, out, z.flops(sizes), z.bytes(sizes))


def _function_program(spec: str, shapes: dict[str, int], device: str) -> Program:
    """The Tensor `path.py:function` returns, built on device (the function's tensors take the default device)."""
    from uopviz.tensor import Tensor
    path_text, _, name = spec.rpartition(":")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no file {path_text!r}")
    module_spec = importlib.util.spec_from_file_location(f"_uopviz_beam_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(f"{path_text} cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    with default_device(device):
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            raise ProgramError(f"{path_text} failed to import: {type(e).__name__}: {e}") from None
        fn = getattr(module, name, None)
        if not callable(fn):
            raise UsageError(f"{path_text} has no function {name!r}")
        try:
            out = fn(**shapes)
        except Exception as e:
            raise ProgramError(f"{spec} failed: {type(e).__name__}: {e}") from None
    if not isinstance(out, Tensor):
        raise UsageError(f"{spec} returned {type(out).__name__}, not a Tensor")
    label = spec + (f" ({', '.join(f'{k}={v}' for k, v in shapes.items())})" if shapes else "")
    return Program(label, out, None, None)


def _table(doc: dict[str, Any], colour: bool) -> str:
    from uopviz.search.beam import format_seconds
    n = len(doc["kernels"])
    found = sum(not k["from_db"] for k in doc["kernels"])
    lines = [f"{doc['program']} on {doc['device']}: BEAM width {doc['beam']} over every kernel of the program "
             f"({n}); {found} searched now, {n - found} answered from the tuning database; {doc['search_s']:.1f} s",
             "",
             f"{'':12s} {'time':>11s} {'GFLOP/s':>9s} {'GB/s':>8s} {'speedup':>8s} {'vs heuristic':>12s}"]
    for v in VARIANTS:
        row = doc["total"][v]
        lines.append(f"{'BEAM' if v == 'beam' else v:12s} {format_seconds(row['time_s']):>11s} "
                     f"{_num(row['gflops']):>9s} {_num(row['gbs']):>8s} {_ratio(row['vs_unoptimized']):>8s} "
                     f"{_ratio(row['vs_heuristic']):>12s}")
    for k in doc["kernels"]:
        searched = k["rounds"] - k["checked"]
        where = (f"search {k['search_id']}, from the database" if k["from_db"] else
                 f"search {k['search_id']}: {k['compiled']} candidates compiled in {searched} "
                 f"round{'s' * (searched != 1)}" + (", then a final check in turns" if k["checked"] else ""))
        lines += ["", f"{_coloured(k['kernel'], colour)} → {_coloured(k['name'], colour)}  ({where})",
                  f"  unoptimized {format_seconds(k['unoptimized_s'])}, heuristic {format_seconds(k['heuristic_s'])}"
                  f", BEAM {format_seconds(k['beam_s'])}",
                  f"  opts: {'; '.join(k['opts_text']) or 'none (the unoptimized kernel is fastest)'}"]
    return "\n".join(lines)


def _coloured(name: str, colour: bool) -> str:
    """A kernel name with each axis (letter and size) in its AxisType's colour, on a terminal."""
    if not colour:
        return name
    from uopviz.uop.ops import AxisType
    prefix, *axes = name.split("_")
    parts = [prefix]
    for a in axes:
        try:
            rgb = AxisType.from_letter(a[:1]).colour.lstrip("#")
        except ValueError:
            parts.append(a)
            continue
        r, g, b = (int(rgb[i:i + 2], 16) for i in (0, 2, 4))
        parts.append(f"\x1b[38;2;{r};{g};{b}m{a}\x1b[0m")
    return "_".join(parts)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _duration(text: str) -> float:
    from uopviz.tune import parse_duration
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shape(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not sep or not name.isidentifier() or n < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with a positive integer VALUE, got {text!r}")
    return name, n
