"""The profile of the example GPT's @jit training step (nanoGPT layout, d 128, 4 heads, 2 blocks, batch 8, T 64,
AdamW): its top kernels by line, and the check that the profile's kernel times add up to the measured step time.

The step is warmed up (compile, capture, replays), then steps are run in turns: one plain (timed from the call to
the device's last kernel done: what the step costs), one inside `uopviz.profile()` (its launches' times added up).
The medians of both are printed, with their ratio: the profile accounts for the step's time when the ratio is
within 10% of 1 (issue 30); and the kernels' own times as the device measures them (events on OpenCL and CUDA, where
a plain step overlaps the host's launching with the device's running, which a profile's wait after each launch
does not: there the launches' sum may pass the step and the kernels' sum fall short of it). The last profiled
step's table follows.

    python bench/profile.py [--device CPU|CL|PYTHON] [--steps 20] [--top 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
from support import example

import uopviz
from uopviz import Tensor, nn
from uopviz.runtime import device as devices


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--device", default=None, help="the device (default: $UOPVIZ_DEVICE, else CPU)")
    ap.add_argument("--steps", type=int, default=20, help="turns of each kind timed (median)")
    ap.add_argument("--top", type=int, default=8, help="lines and kernels of each shown")
    args = ap.parse_args()
    device = devices.canonical(args.device)
    os.environ["UOPVIZ_DEVICE"] = device  # the example builds its weights on the default device
    gpt = example("gpt")
    cfg = gpt.GPTConfig()
    Tensor.manual_seed(0)
    model = gpt.GPT(cfg)
    step = gpt.train_step(model, nn.optim.AdamW(model.parameters(), lr=1e-4))
    rng = np.random.default_rng(0)
    x, y = (Tensor(rng.integers(0, cfg.vocab_size, (8, cfg.block_size)).astype(np.int32), device=device)
            for _ in range(2))
    runtime = devices.get(device)
    for _ in range(4):  # compile, capture, replay
        step(x, y)
    runtime.synchronize()

    plain: list[float] = []
    profiles: list[uopviz.profile.Profile] = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step(x, y)
        runtime.synchronize()
        plain.append(time.perf_counter() - t0)
        with uopviz.profile() as p:
            step(x, y)
        profiles.append(p)
    step_s, kernel_s = statistics.median(plain), statistics.median(p.kernel_s for p in profiles)
    device_s = statistics.median(p.device_s for p in profiles)
    print(f"GPT @jit training step on {device}, median of {args.steps} turns: measured {step_s * 1e3:.2f} ms, "
          f"profile's launches add up to {kernel_s * 1e3:.2f} ms ({kernel_s / step_s:.1%} of the step; "
          f"{'within' if abs(kernel_s / step_s - 1) <= 0.10 else 'NOT within'} 10%), their kernels as the device "
          f"times them to {device_s * 1e3:.2f} ms ({device_s / step_s:.1%})")
    print()
    print(profiles[-1].table(args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
