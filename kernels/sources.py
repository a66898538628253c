"""`python -m kernels.sources [--devices CPU CL] [--small]`: every zoo kernel's generated source, as JSON.

A refactor of the lowering that should not change what it generates is checked by running this before and
after and comparing the two files (`diff` or `cmp`): each kernel appears unoptimized and with the heuristic's
opts, on each device asked for that is available here. It lowers without running and reads no tuning database.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any


def sources(devices: Sequence[str], small: bool) -> dict[str, Any]:
    """{device: {zoo name: [{"opts": ..., "name": ..., "source": ...}, ...]}} for each available device."""
    from uopviz.kernels import ZOO

    from uopviz.codegen.opt.heuristic import heuristic_opts
    from uopviz.compiler import compile_kernel
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.pipeline import scheduler as scheduler_of
    from uopviz.runtime import device as devs
    from uopviz.tensor import Tensor

    out: dict[str, Any] = {}
    for dev in devs.available(devices):
        target = devs.get(dev).target
        per: dict[str, Any] = {}
        for name, z in ZOO.items():
            sizes = z.sizes(small=small)
            prog = z.program(*[Tensor.empty(*i.shape(sizes), dtype=i.dtype, device=dev) for i in z.inputs])
            rows = []
            for ast, _ in kernels_of(schedule([prog.uop])):
                for opts in ([], heuristic_opts(scheduler_of(ast, target))):
                    kernel, _ = compile_kernel(ast, dev, opts)
                    rows.append({"opts": [o.to_json() for o in opts], "name": kernel.name, "source": kernel.source})
            per[name] = rows
        out[dev] = per
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kernels.sources", description=__doc__.splitlines()[0])
    ap.add_argument("--devices", nargs="+", default=["CPU", "CL"], help="devices to lower for (those here)")
    ap.add_argument("--small", action="store_true", help="the zoo's small sizes")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:  # an empty tuning database: nothing but the given opts
        os.environ["UOPVIZ_CACHE_DIR"] = cache
        json.dump(sources(args.devices, args.small), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
