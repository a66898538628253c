"""Ctrl-C during a multi-threaded CPU kernel: the kernel's threads must finish before KeyboardInterrupt reaches
Python, or they keep writing into buffers Python has already freed (and maybe handed to a new array)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from uopviz.runtime import device as devices

# Runs in a child process so that a crash (the symptom before the fix) fails the test instead of the suite.
CHILD = textwrap.dedent("""
    import gc, os, random, signal, threading, time
    import numpy as np
    from uopviz.compiler import compile_kernel
    from uopviz.search.policy import default_opts
    from uopviz.pipeline import kernels_of, schedule
    from uopviz.tensor import Tensor

    N = 1 << 23
    x = Tensor.empty(N)
    (ast, bufs), = kernels_of(schedule([((x * 3 + 1) * x).uop]))
    kernel, prog = compile_kernel(ast, "CPU", default_opts(ast, "CPU"))
    assert kernel.threads > 1, kernel.threads
    start = time.perf_counter()
    prog([np.empty(N, np.float32), np.ones(N, np.float32)])
    per_run = time.perf_counter() - start

    rng, interrupted, changed = random.Random(0), 0, 0
    for _ in range(ROUNDS):
        out, inp = np.empty(N, np.float32), np.ones(N, np.float32)
        threading.Timer(rng.uniform(0, per_run), os.kill, (os.getpid(), signal.SIGINT)).start()
        try:
            for _ in range(4):
                prog([out, inp])
            time.sleep(per_run)  # the timer fires in here if it did not during the runs
        except KeyboardInterrupt:
            interrupted += 1
        del out, inp
        gc.collect()
        fresh = [np.zeros(N, np.float32) for _ in range(2)]  # likely the memory the kernel was writing
        time.sleep(2 * per_run)  # a kernel still running would write into it now
        changed += sum(int(np.count_nonzero(a)) for a in fresh)
    print(interrupted, changed)
""")


@pytest.mark.slow
def test_ctrl_c_during_a_thread_kernel_never_corrupts_memory() -> None:
    if devices.get("CPU").target.threads < 2:
        pytest.skip("needs at least two cores for a THREAD kernel")
    rounds = 25
    r = subprocess.run([sys.executable, "-c", CHILD.replace("ROUNDS", str(rounds))], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"the child died (exit {r.returncode}): {r.stderr[-2000:]}"
    interrupted, changed = map(int, r.stdout.split())
    assert interrupted == rounds  # every round was interrupted (during a run, or just after)
    assert changed == 0, f"{changed} floats of freshly zeroed arrays changed after an interrupted kernel"
