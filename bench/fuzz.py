"""The differential fuzzer run long (issue 27): random Tensor programs and their gradients on one uopviz device,
each checked against the same program in torch (float64, or exactly for int programs). A failing program is
printed with its seed and mismatches, shrunk to a minimal one (delta debugging: ops dropped, dims shrunk, inputs
made plain) and printed again as a listing and as a pytest function for tests/tensor/test_fuzz.py.

    python bench/fuzz.py --programs 500 [--seed 0] [--device CPU|CL|PYTHON] [--grad/--no-grad] [--no-shrink]

The generator, interpreters and shrinker are tests/tensor/fuzzing.py (it needs torch, which uopviz does not).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tensor"))  # fuzzing.py, beside the tests

import fuzzing


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0, help="the first program's seed; the others follow it")
    ap.add_argument("--device", default="CPU", choices=["CPU", "CL", "PYTHON"])
    ap.add_argument("--grad", action=argparse.BooleanOptionalAction, default=True,
                    help="check the gradients of float32/float64 programs too")
    ap.add_argument("--shrink", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--max-failures", type=int, default=10, help="stop after this many failing programs")
    args = ap.parse_args()

    t0 = time.perf_counter()
    failures: list[int] = []
    for k, seed in enumerate(range(args.seed, args.seed + args.programs), 1):
        prog, found = fuzzing.find(seed, args.device, args.grad, **fuzzing.DEVICE_SIZES[args.device])
        if k % 25 == 0:
            print(f"{k} programs, {len(failures) + bool(found)} failing, {time.perf_counter() - t0:.0f} s", flush=True)
        if not found:
            continue
        failures.append(seed)
        print(f"\n=== program {k} (seed {seed}) fails on {args.device}:\n" + "\n".join(found), flush=True)
        print(fuzzing.listing(prog))
        if args.shrink:
            crash = found[0].startswith("error")

            def fails(p: fuzzing.Program, crash: bool = crash) -> bool:
                m = fuzzing.mismatches(p, args.device, args.grad)
                return bool(m) and m[0].startswith("error") == crash

            small = fuzzing.shrink(prog, fails, args.grad, log=print)
            print(f"--- shrunk ({len(small['ops'])} ops):\n" + "\n".join(fuzzing.mismatches(small, args.device,
                                                                                               args.grad)))
            print(fuzzing.listing(small))
            print("--- as a test:\n" + fuzzing.regression_test(small, args.device, args.grad, f"fuzz_seed_{seed}"),
                  flush=True)
        if len(failures) >= args.max_failures:
            break
    print(f"\n{args.device}: {k} programs from seed {args.seed}, {len(failures)} failing "
          f"({', '.join(map(str, failures)) or 'none'}), {time.perf_counter() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
