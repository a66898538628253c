"""Native compilers take only source as the renderer writes it, and a limited time (issue 28): a Source text that
names a file (`#include "/etc/passwd"`, a FIFO, and the other spellings a compiler reads a file by) makes no
compiler read it or hang, and a compiler past its limit, or interrupted, is killed with every process under it:
the C compiler, and OpenCL's and NVRTC's, which run in the compile worker (runtime/compile_worker.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from devices_here import needs_cl

from tests.cuda.support import needs_nvrtc
from uopviz.codegen.opt.heuristic import heuristic_opts
from uopviz.dtype import DType, dtypes
from uopviz.pipeline import kernels_of, lower, schedule, scheduler
from uopviz.runtime import compile_worker
from uopviz.runtime import device as devices
from uopviz.runtime.cl import CLRuntime
from uopviz.runtime.cpu import CompileTimeoutError, CPURuntime
from uopviz.runtime.cuda import cuda_target, nvrtc_compile
from uopviz.runtime.device import CompileError
from uopviz.runtime.source import UntrustedSourceError, check_source
from uopviz.target import Kernel, Target
from uopviz.tensor import Tensor
from uopviz.uop.ops import Ops, UOp

PASSWD = "/etc/passwd"
FIRST_LINE = Path(PASSWD).read_text().splitlines()[0]
KERNEL = "void one(float* restrict data0) { data0[0] = 1.0f; }\n"

# each a way to make a C, OpenCL or CUDA compiler open a file the text names
SPELLINGS = {
    "include": '#include "{f}"\n',
    "angle include": "#include <{f}>\n",
    "after a comment": '/* a comment */ #include "{f}"\n',
    "after a comment over lines": '/* a comment\n   over two lines */ #include "{f}"\n',
    "joined lines": '#\\\ninclude "{f}"\n',
    "joined lines after blanks": '#  \\  \ninclude "{f}"\n',
    "spaced": '   #   include "{f}"\n',
    "digraph": '%:include "{f}"\n',
    "trigraph": '??=include "{f}"\n',
    "include_next": '#include_next "{f}"\n',
    "embed": '#embed "{f}"\n',
    "pragma dependency": '#pragma GCC dependency "{f}"\n',
    "_Pragma": '_Pragma("GCC dependency \\"{f}\\"")\n',
    "macro include": '#define F "{f}"\n#include F\n',
    "line": '#line 1 "{f}"\n',
    "__has_include": 'int x = __has_include("{f}");\n',
    "asm incbin": '__asm__(".incbin \\"{f}\\"");\n',
    "pasted asm": '#define CAT(a, b) a##b\nCAT(__a, sm__)(".incbin \\"{f}\\"");\n',
    "digit separator": "int x = 1'0'/*';\n#include \"{f}\"\n// */\n",
    "raw string": 'const char* s = R"x(" /* ")x";\n#include "{f}"\n// */\n',
}
NOT_CUDA = {"asm incbin"}  # CUDA's renderer writes asm: PTX, which reads no file (NVRTC just fails to compile it)


def attack(spelling: str, f: str = PASSWD) -> str:
    return SPELLINGS[spelling].format(f=f) + KERNEL


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_cpu_compiler_reads_no_file_a_source_names(cache: Path, spelling: str) -> None:
    with pytest.raises(UntrustedSourceError) as e:
        CPURuntime().library(attack(spelling), "one")  # the machine-code route's call
    assert FIRST_LINE not in str(e.value) and "renderer" in str(e.value)


@needs_cl
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_opencl_compiler_reads_no_file_a_source_names(spelling: str) -> None:
    """Through compile (every kernel's route) and binary (the machine-code route's); libraries leaves it unbuilt."""
    rt = devices.get("CL")
    assert isinstance(rt, CLRuntime)
    source = attack(spelling).replace("void one", "__kernel void one")
    one, two = (Kernel(name, UOp(Ops.LINEAR, ()), source, ()) for name in ("one", "two"))
    rt.libraries([one, two])
    for build in (lambda: rt.compile(one), lambda: rt.binary(source, "one")):
        with pytest.raises(UntrustedSourceError) as e:
            build()
        assert FIRST_LINE not in str(e.value)


@needs_nvrtc
@pytest.mark.parametrize("spelling", sorted(set(SPELLINGS) - NOT_CUDA))
def test_nvrtc_reads_no_file_a_source_names(spelling: str) -> None:
    with pytest.raises(UntrustedSourceError) as e:
        source = attack(spelling).replace("void one", 'extern "C" __global__ void one')
        nvrtc_compile(source.replace("restrict", "__restrict__"), "one", "sm_80")
    assert FIRST_LINE not in str(e.value)


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO: a compiler that opened it would wait for a writer for good. Afterwards a writer is opened and closed,
    so that anything left waiting on it (as the old code's compiler was) reads an end of file and exits."""
    path = tmp_path / "fifo.h"
    os.mkfifo(path)
    yield path
    with contextlib.suppress(OSError):  # OSError: no reader, so nothing waits on it
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def test_an_included_fifo_neither_hangs_nor_is_opened(cache: Path, fifo: Path) -> None:
    done: list[BaseException | None] = []

    def build() -> None:
        try:
            CPURuntime().library(attack("include", str(fifo)), "one")
            done.append(None)
        except BaseException as e:
            done.append(e)

    t = threading.Thread(target=build, daemon=True)
    t.start()
    t.join(60)
    assert done, "the compiler hung on the FIFO"
    assert isinstance(done[0], UntrustedSourceError)


def lowered(target: Target, dt: DType) -> list[str]:
    """The sources of a matmul and a softmax in dt lowered for target, unoptimized and with the heuristic's opts."""
    a, b = (Tensor.empty(16, 16, dtype=dt, device="PYTHON") for _ in range(2))
    out = [(a @ b).uop, (a.float().softmax(-1)).uop]
    return [lower(ast, target, opts).source or "" for ast, _ in kernels_of(schedule(out))
            for opts in ([], heuristic_opts(scheduler(ast, target)))]


@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16, dtypes.bfloat16, dtypes.float64], ids=str)
def test_what_the_renderer_writes_passes(dt: DType) -> None:
    """The check is the renderer's own forms: its preambles, pragmas, FMA helpers and PTX asm all pass."""
    targets = [("CPU", devices.get("CPU").target, False), ("CUDA", cuda_target("sm_80"), True)]
    if devices.available(["CL"]):
        targets.append(("CL", devices.get("CL").target, False))
    for device, target, asm in targets:
        if dt is dtypes.float64 and device == "CUDA":
            continue
        for source in lowered(target, dt):
            check_source(source, device, "k", asm=asm)


# ---- the time limit ----
@pytest.fixture
def hanging_cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """CC: a compiler that starts a child (as gcc starts cc1) and waits on it, writing both pids to a file."""
    pids = tmp_path / "pids"
    cc = tmp_path / "cc"
    cc.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "hanging cc 1.0"; exit 0; fi\n'
                  f'sleep 60 & echo $$ $! > {pids}\nwait\n')
    cc.chmod(0o700)
    monkeypatch.setenv("CC", str(cc))
    yield pids
    for pid in _pids(pids):  # the old code left them running: end what this test started
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _all_ended(pids: list[int]) -> bool:
    """Whether every pid has ended within a few seconds (a killed process takes a moment to go)."""
    for _ in range(500):
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.01)
    return False


def _wait_for(path: Path) -> None:
    for _ in range(500):
        if len(_pids(path)) == 2:
            return
        time.sleep(0.01)


def test_a_compiler_past_its_limit_is_killed_with_its_children(cache: Path, hanging_cc: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_COMPILE_TIMEOUT", "1")
    t0 = time.monotonic()
    with pytest.raises(CompileTimeoutError, match=r"ran past the compiler's time limit of 1 s and was killed"):
        CPURuntime().library(KERNEL, "one")
    assert time.monotonic() - t0 < 30
    pids = _pids(hanging_cc)
    assert len(pids) == 2 and _all_ended(pids), "a compiler process outlived its request"


class Alarm(Exception):
    """What a search's per-candidate alarm raises in its worker."""


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, Alarm])
def test_an_interrupted_compile_leaves_no_compiler_running(cache: Path, hanging_cc: Path,
                                                           interrupt: type[BaseException]) -> None:
    def raise_it(signum: int, frame: object) -> None:
        raise interrupt("interrupted")

    saved = signal.signal(signal.SIGALRM, raise_it)
    threading.Thread(target=lambda: (_wait_for(hanging_cc), signal.setitimer(signal.ITIMER_REAL, 0.05)),
                     daemon=True).start()
    try:
        with pytest.raises(interrupt):
            CPURuntime().library(KERNEL, "one")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, saved)
    pids = _pids(hanging_cc)
    assert len(pids) == 2 and _all_ended(pids), "a compiler process outlived its request"


def test_a_bad_time_limit_is_named(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_COMPILE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="UOPVIZ_COMPILE_TIMEOUT must be a positive number of seconds"):
        CPURuntime().library(KERNEL, "one")


# ---- the in-process compilers (OpenCL, NVRTC), run in the compile worker ----
def slow_kernel(dialect: str) -> str:
    """A kernel LLVM takes seconds over (1000 data-dependent branches: ~4 s under PoCL, ~25 s in NVRTC on a quiet
    machine), made unique so that no driver's cache of built programs answers for it."""
    salt = time.time_ns() % 1_000_003
    body = "\n".join(f"  if (a[{i * 7 % 1021}] > {i % 13}.5f) {{ a[{i * 3 % 1019}] += a[{i * 11 % 1013}] * "
                     f"{salt + i}.0f; }} else {{ a[{i % 1009}] -= 1.0f; }}" for i in range(1000))
    head = ('extern "C" __global__ void slow(float* __restrict__ a)' if dialect == "CUDA"
            else "__kernel void slow(__global float* restrict a)")
    return f"{head} {{\n{body}\n}}\n"


QUICK = {"CL": "__kernel void quick(__global float* restrict a) { a[0] = 1.0f; }\n",
         "CUDA": 'extern "C" __global__ void quick(float* __restrict__ a) { a[0] = 1.0f; }\n'}


def compile_on(device: str, source: str, name: str) -> bytes:
    """source compiled the way the device's runtime compiles it: a CL program binary, or NVRTC's cubin."""
    if device == "CL":
        return devices.get("CL").binary(source, name)  # type: ignore[attr-defined]
    return nvrtc_compile(source, name, "sm_80")


IN_WORKER = [pytest.param("CL", marks=needs_cl), pytest.param("CUDA", marks=needs_nvrtc)]
COMPILER = {"CL": "the OpenCL compiler", "CUDA": "NVRTC"}


def _group(pgid: int) -> list[int]:
    """The live processes of process group pgid (the worker's group: the worker and anything it started)."""
    out = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()
            if fields[0] != "Z" and int(fields[2]) == pgid:
                out.append(int(name))
    return out


def _group_ended(pgid: int) -> bool:
    for _ in range(500):
        if not _group(pgid):
            return True
        time.sleep(0.01)
    return False


def _warm_worker(device: str) -> int:
    """Start this process's compile worker with a quick compile; its pid."""
    compile_on(device, QUICK[device], "quick")
    pid = compile_worker.worker().pid
    assert pid is not None
    return pid


@pytest.mark.parametrize("device", IN_WORKER)
def test_an_in_process_compiler_past_its_limit_is_killed(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _warm_worker(device)
    monkeypatch.setenv("UOPVIZ_COMPILE_TIMEOUT", "0.5")
    t0 = time.monotonic()
    with pytest.raises(CompileTimeoutError) as e:
        compile_on(device, slow_kernel(device), "slow")
    assert time.monotonic() - t0 < 10
    assert e.value.name == "slow" and e.value.device == device
    assert f"{COMPILER[device]} ran past the compiler's time limit of 0.5 s and was killed" in str(e.value)
    assert "UOPVIZ_COMPILE_TIMEOUT" in str(e.value)
    assert _group_ended(pid), "a compile worker outlived its request"
    assert compile_worker.worker().pid is None
    monkeypatch.delenv("UOPVIZ_COMPILE_TIMEOUT")
    assert compile_on(device, QUICK[device], "quick")  # the next request starts a new worker
    assert compile_worker.worker().pid not in (None, pid)


@pytest.mark.parametrize("device", IN_WORKER)
@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, Alarm])
def test_an_interrupted_in_process_compile_leaves_no_worker(device: str, interrupt: type[BaseException]) -> None:
    pid = _warm_worker(device)

    def raise_it(signum: int, frame: object) -> None:
        raise interrupt("interrupted")

    saved = signal.signal(signal.SIGALRM, raise_it)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(interrupt):
            compile_on(device, slow_kernel(device), "slow")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, saved)
    assert _group_ended(pid), "a compile worker outlived its interrupted request"


@pytest.mark.parametrize("device", IN_WORKER)
def test_a_compile_error_in_the_worker_gives_the_log_and_keeps_the_worker(device: str) -> None:
    pid = _warm_worker(device)
    source = QUICK[device].replace("1.0f", "undefined_name")
    with pytest.raises(CompileError) as e:
        compile_on(device, source, "quick")
    assert type(e.value) is CompileError and e.value.source == source and "undefined_name" in e.value.log
    assert compile_worker.worker().pid == pid  # a failed compile is an answer, not a reason to restart


@pytest.mark.parametrize("device", IN_WORKER)
def test_a_worker_that_died_between_requests_is_started_again(device: str) -> None:
    pid = _warm_worker(device)
    os.killpg(pid, signal.SIGKILL)  # as serve's Ctrl-C kills every process under it
    assert _group_ended(pid)
    assert compile_on(device, QUICK[device], "quick")
    assert compile_worker.worker().pid not in (None, pid)


@needs_cl
def test_a_bad_time_limit_is_named_for_opencl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UOPVIZ_COMPILE_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="UOPVIZ_COMPILE_TIMEOUT must be a positive number of seconds"):
        compile_on("CL", QUICK["CL"], "quick")


@needs_cl
def test_a_program_made_from_the_worker_s_binary_computes_what_its_source_says() -> None:
    """The binary the worker returns loads into this process's context and runs right."""
    import numpy as np

    rt = devices.get("CL")
    x = Tensor(np.arange(1, 65, dtype=np.float32), device="CL")
    np.testing.assert_allclose(((x * 0.25).exp2().sum()).numpy(), np.exp2(np.arange(1, 65) * 0.25).sum(), rtol=1e-5)
    assert rt.describe()["device"] == "CL"


# What serve's Ctrl-C does (backend/serve.py kill_descendants), in a process of its own: it kills every process
# under the one it runs in. A request waiting on the killed worker fails at once; the next starts a new worker.
CTRL_C = """
import json, sys, threading, time
from uopviz.backend.serve import kill_descendants
from uopviz.runtime import compile_worker
from uopviz.runtime import device as devices
from tests.runtime.test_compiler_limits import QUICK, compile_on, slow_kernel

device = sys.argv[1]
compile_on(device, QUICK[device], "quick")
pid = compile_worker.worker().pid
failed = []

def slow():
    try:
        compile_on(device, slow_kernel(device), "slow")
    except Exception as e:
        failed.append(f"{type(e).__name__}: {e}")

t = threading.Thread(target=slow)
t.start()
time.sleep(0.5)
kill_descendants()
t0 = time.monotonic()
t.join(30)
waited = time.monotonic() - t0
compile_on(device, QUICK[device], "quick")
print(json.dumps({"pid": pid, "waited": waited, "failed": failed, "again": compile_worker.worker().pid}))
"""


@pytest.mark.parametrize("device", IN_WORKER)
def test_serve_s_ctrl_c_kills_a_compiling_worker_and_its_request_fails_at_once(device: str) -> None:
    pytest.importorskip("uvicorn", reason="the server's extra is not installed (bench/gpu.sh runs this file on a GPU "
                                          "machine that has NVRTC but not the server)")
    root = Path(__file__).parents[2]
    env = {**os.environ, "UOPVIZ_COMPILE_TIMEOUT": "600", "PYTHONPATH": f"{root}{os.pathsep}{root / 'tests'}"}
    r = subprocess.run([sys.executable, "-c", CTRL_C, device], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["waited"] < 5 and len(out["failed"]) == 1, out
    assert out["failed"][0].startswith("CompileError: ") and "ended without an answer (killed by SIGKILL)" in \
        out["failed"][0], out
    assert _group_ended(out["pid"]) and out["again"] not in (None, out["pid"])
