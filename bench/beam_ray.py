"""BEAM over the whole zoo, locally and on a local Ray cluster, side by side: the wall time of tuning every kernel of
every zoo program, and the final kernel times each tuning chose.

The cluster is this machine's: a head with no CPUs and NODES worker nodes with CPUS CPUs each, every one owning the
CPU device (uopviz.search.ray_executor.device_resources), all on 127.0.0.1. The local run uses a process pool of one
compile process per core and searches one kernel after another, as `uopviz beam` does; the cluster run searches
several kernels at once (RayExecutor's default), as `uopviz beam --ray` does. Each run has its own fresh tuning
database and compiled-kernel cache, so both compile and time everything they report. Timing noise makes the two
searches choose differently at times: compare the totals, not kernel by kernel. The searches' own times were taken
beside running builds (on this small machine the cluster's timing nodes also compile), so each side's choices are
then compiled and timed again here, in turns: those columns compare what the two tunings chose.

    python bench/beam_ray.py [KERNEL ...] [--beam 2] [--rounds 3] [--nodes 2] [--cpus 1] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback addresses


def zoo_kernels(names: list[str], small: bool) -> dict[str, tuple[Any, list[Any]]]:
    """Every kernel of the named zoo programs by label ("gemm[0]"): its AST and its buffers."""
    from uopviz.kernels import ZOO

    from uopviz.pipeline import kernels_of, schedule
    out: dict[str, tuple[Any, list[Any]]] = {}
    for name in names:
        z = ZOO[name]
        result, _ = z.build(z.sizes(small=small), "CPU")
        for i, (ast, bufs) in enumerate(kernels_of(schedule([result.uop]))):
            out[f"{name}[{i}]"] = (ast, bufs)
    return out


def tune(names: list[str], width: int, rounds: int, small: bool, executor: object | None
         ) -> tuple[float, dict[str, tuple[str, float, list[Any]]]]:
    """Wall seconds to tune every kernel of the named zoo programs, and each kernel's name, time and opts as the
    search chose them."""
    from uopviz.search.beam import beam_many
    t0 = time.perf_counter()
    kernels = zoo_kernels(names, small)
    # one call, as `uopviz beam all` makes: on the cluster several kernels are searched at once
    results = beam_many([(ast, "CPU") for ast, _ in kernels.values()], width, max_rounds=rounds, progress=False,
                        executor=executor)
    return time.perf_counter() - t0, {k: (r.kernel_name, r.time_s, [o.to_json() for o in r.opts])
                                      for k, r in zip(kernels, results, strict=True)}


def retime(names: list[str], small: bool, chosen: dict[str, dict[str, list[Any]]], reps: int = 9
           ) -> dict[str, dict[str, float]]:
    """Each side's chosen opts of each kernel, compiled and timed here, in turns (median of reps): the searches
    timed on busy nodes (builds ran beside the timing), so their own times are no fair comparison."""
    from uopviz.codegen.opt.scheduler import Opt
    from uopviz.compiler import compile_kernel
    from uopviz.runtime import buffer as buffers
    times: dict[str, dict[str, float]] = {side: {} for side in chosen}
    for label, (ast, bufs) in zoo_kernels(names, small).items():
        handles = [buffers.handle(b) for b in bufs]
        progs = {side: compile_kernel(ast, "CPU", [Opt.from_json(o) for o in chosen[side][label]])[1]
                 for side in chosen}
        samples: dict[str, list[float]] = {side: [] for side in chosen}
        for _ in range(reps + 1):  # the first round warms up
            for side, prog in progs.items():
                samples[side].append(prog(handles, wait=True) or 0.0)
        for side in chosen:
            times[side][label] = statistics.median(samples[side][1:])
    return times


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernels", nargs="*", help="zoo programs (default: all)")
    p.add_argument("--beam", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--cpus", type=int, default=1, help="CPUs per worker node (compile tasks at once)")
    p.add_argument("--small", action="store_true", help="the zoo's small sizes")
    p.add_argument("--side", choices=("local", "ray"), help=argparse.SUPPRESS)  # one side, in its own process
    args = p.parse_args()
    from uopviz.kernels import ZOO
    names = args.kernels or list(ZOO)
    if args.side is None:  # each side in a fresh process with its own caches: nothing compiled is shared
        results = {}
        for side in ("local", "ray"):
            with tempfile.TemporaryDirectory() as d:
                env = {**os.environ, "UOPVIZ_CACHE_DIR": d}
                cmd = [sys.executable, __file__, *names, "--side", side, "--beam", str(args.beam), "--rounds",
                       str(args.rounds), "--nodes", str(args.nodes), "--cpus", str(args.cpus)]
                out = subprocess.run(cmd + ["--small"] * args.small, env=env, capture_output=True, text=True,
                                     check=True).stdout
                results[side] = json.loads(out)
        report(results, retime(names, args.small, {side: {k: v[2] for k, v in r["kernels"].items()}
                                                  for side, r in results.items()}), args)
        return 0
    executor = None
    cluster = None
    if args.side == "ray":
        import ray
        from ray.cluster_utils import Cluster

        from uopviz.search.ray_executor import RayExecutor, device_resources
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1",
                                                                "include_dashboard": False})
        for _ in range(args.nodes):
            cluster.add_node(node_ip_address="127.0.0.1", num_cpus=args.cpus, resources=device_resources(["CPU"]))
        ray.init(address=cluster.address, log_to_driver=False)
        executor = RayExecutor()
    try:
        wall, times = tune(names, args.beam, args.rounds, args.small, executor)
    finally:
        if cluster is not None:
            executor.close()  # type: ignore[union-attr]
            ray.shutdown()
            cluster.shutdown()
    print(json.dumps({"wall": wall, "kernels": times}))
    return 0


def report(results: dict[str, Any], retimed: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    from uopviz.search.beam import format_seconds
    local, on_ray = results["local"], results["ray"]
    print(f"zoo BEAM width {args.beam}, at most {args.rounds} rounds{', small sizes' if args.small else ''}; "
          f"local: {os.cpu_count()} compile processes; ray: {args.nodes} worker nodes x {args.cpus} CPU on 127.0.0.1")
    print("kernel times: as the search measured them, then each side's choice re-timed here, in turns")
    print(f"{'':38s} {'local':>10s} {'ray':>10s} {'local again':>12s} {'ray again':>10s}")
    print(f"{'wall time of the whole tuning':38s} {local['wall']:9.1f}s {on_ray['wall']:9.1f}s")
    for label, (name, t, _) in local["kernels"].items():
        row = [t, on_ray["kernels"][label][1], retimed["local"][label], retimed["ray"][label]]
        print(f"{(label + ' ' + name)[:38]:38s} {format_seconds(row[0]):>10s} {format_seconds(row[1]):>10s} "
              f"{format_seconds(row[2]):>12s} {format_seconds(row[3]):>10s}")
    sums = [sum(r["kernels"][k][1] for k in r["kernels"]) for r in (local, on_ray)]
    sums += [sum(retimed[side].values()) for side in ("local", "ray")]
    print(f"{'sum of the chosen kernel times':38s} {format_seconds(sums[0]):>10s} {format_seconds(sums[1]):>10s} "
          f"{format_seconds(sums[2]):>12s} {format_seconds(sums[3]):>10s}")


if __name__ == "__main__":
    sys.exit(main())
