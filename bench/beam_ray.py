"""BEAM over the whole zoo, locally and on a local Ray cluster, side by side: the wall time of tuning every kernel of
every zoo program, and the final kernel times each tuning chose.

The cluster is this machine's: a head with no CPUs and NODES worker nodes with CPUS CPUs each, every one owning the
CPU device (uopviz.search.ray_executor.device_resources), all on 127.0.0.1. The local run uses a process pool of one
compile process per core and searches one kernel after another, as `uopviz beam` does; the cluster run searches
several kernels at once (RayExecutor's default), as `uopviz beam --ray` does. Each run has its own fresh tuning
database and compiled-kernel cache, so both compile and time everything they report. Timing noise makes the two
searches choose differently at times: compare the totals, not kernel by kernel.

    python bench/beam_ray.py [KERNEL ...] [--beam 2] [--rounds 3] [--nodes 2] [--cpus 1] [--small]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on loopback addresses


def tune(names: list[str], width: int, rounds: int, small: bool, executor: object | None) -> tuple[float, dict]:
    """Wall seconds to tune every kernel of the named zoo programs, and each kernel's chosen time."""
    from kernels import ZOO
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.search.beam import beam_many
    t0 = time.perf_counter()
    labels, kernels = [], []
    for name in names:
        z = ZOO[name]
        out, _ = z.build(z.sizes(small=small), "CPU")
        for i, (ast, _) in enumerate(kernels_of(schedule([out.uop]))):
            labels.append(f"{name}[{i}]")
            kernels.append((ast, "CPU"))
    # one call, as `uopviz beam all` makes: on the cluster several kernels are searched at once
    results = beam_many(kernels, width, max_rounds=rounds, progress=False, executor=executor)
    return time.perf_counter() - t0, {f"{k} {r.kernel_name}": r.time_s for k, r in zip(labels, results, strict=True)}


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
    from kernels import ZOO
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
                results[side] = {k: float(v) for k, v in (line.rsplit("\t", 1) for line in out.splitlines())}
        report(results, args)
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
    print(f"wall\t{wall}")
    for k, v in times.items():
        print(f"{k}\t{v}")
    return 0


def report(results: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    from uopviz.search.beam import format_seconds
    local, on_ray = results["local"], results["ray"]
    print(f"zoo BEAM width {args.beam}, at most {args.rounds} rounds{', small sizes' if args.small else ''}; "
          f"local: {os.cpu_count()} compile processes; ray: {args.nodes} worker nodes x {args.cpus} CPU on 127.0.0.1")
    print(f"{'':44s} {'local':>11s} {'ray':>11s}")
    print(f"{'wall time of the whole tuning':44s} {local['wall']:10.1f}s {on_ray['wall']:10.1f}s")
    for k in local:
        if k != "wall":
            print(f"{k[:44]:44s} {format_seconds(local[k]):>11s} {format_seconds(on_ray.get(k)):>11s}")
    total = [sum(v for k, v in r.items() if k != "wall") for r in (local, on_ray)]
    print(f"{'sum of the chosen kernel times':44s} {format_seconds(total[0]):>11s} {format_seconds(total[1]):>11s}")


if __name__ == "__main__":
    sys.exit(main())
