"""The CPU runtime: C source compiled by the system C compiler into a shared library, called through ctypes.

The compiler is `$CC` if set, else the first of gcc, clang, cc found on PATH, with `-O2 -march=native`.
Compiled libraries are cached on disk under the cache directory (`$UOPVIZ_CACHE_DIR`, default
`~/.cache/uopviz`), keyed by a hash of the source, the compiler's identity and the flags, so a kernel is
compiled once per machine, not once per process. The cache is code this process runs, so it is trusted as the
user's home is (runtime/trust.py), and the compiler takes only source as the renderer writes it (runtime/source.py),
within a time limit.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from uopviz.codegen.rowcache import STACK_BYTES
from uopviz.dtype import DType, dtypes
from uopviz.renderer.dialect import C
from uopviz.runtime import workers
from uopviz.runtime.device import CompileError, DeviceUnavailableError, Program, Runtime, UnknownDeviceError
from uopviz.runtime.source import check_source, exported, unit
from uopviz.runtime.trust import load_library, open_checked, trusted_dir
from uopviz.target import Cache, Kernel, Target
from uopviz.uop.ops import Ops

FLAGS = ("-O2", "-march=native", "-shared", "-fPIC", "-ffp-contract=off", "-fno-math-errno",
         "-Werror=int-to-pointer-cast", "-Werror=int-conversion")
"""The last two make a kernel whose text uses an integer as an address a compile error, not a read of arbitrary
memory: the IR's bounds are checked, its rendering is not (a select's lost parentheses once rendered
`data1+c?i:0`, an int, cast to a vector's pointer)."""


def flags(source: str) -> tuple[str, ...]:
    """The compiler flags for source: FLAGS, without GCC's SLP vectorizer where a double may be rounded to float.
    GCC 12 turns two scalar double -> float -> double round trips into vector(2) conversions and then folds the pair
    away (it compares the two vector types' precision, which for a vector is its lane count), so the rounding
    silently vanished from every other element (found by the fuzzer, CPU seed 10691). The test is a safe
    over-approximation: a kernel that holds doubles and casts to float."""
    return (*FLAGS, "-fno-tree-slp-vectorize") if "double" in source and "(float)" in source else FLAGS


def cache_dir() -> Path:
    """Where uopviz keeps compiled kernels and its tuning database."""
    return Path(os.environ.get("UOPVIZ_CACHE_DIR") or Path.home() / ".cache" / "uopviz")


COMPILE_TIMEOUT_S = 120.0
"""How long the C compiler may take over one library before it is killed (`$UOPVIZ_COMPILE_TIMEOUT` seconds
overrides it): a kernel compiles in about a second, so one that takes minutes is stuck, not slow."""


class CompileTimeoutError(CompileError):
    """The compiler ran past its time limit and was killed."""


def compile_timeout() -> float:
    """The compiler's time limit in seconds: `$UOPVIZ_COMPILE_TIMEOUT`, else COMPILE_TIMEOUT_S."""
    text = os.environ.get("UOPVIZ_COMPILE_TIMEOUT", "").strip()
    try:
        seconds = float(text) if text else COMPILE_TIMEOUT_S
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ValueError(f"UOPVIZ_COMPILE_TIMEOUT must be a positive number of seconds, got {text!r}")
    return seconds


def run_compiler(args: list[str], stdin: str, device: str, name: str) -> subprocess.CompletedProcess[str]:
    """args run with stdin, in a process group of its own that is killed whole (the driver, and cc1, as and ld
    under it, which outlive a killed driver) when it runs past compile_timeout() or when this thread is interrupted
    (Ctrl-C, a search's per-candidate alarm): no compiler outlives its request. CompileTimeoutError on the limit."""
    timeout = compile_timeout()
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          process_group=0) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=timeout)
        except BaseException as e:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()  # reaped now, not when the Popen is collected (a Ctrl-C skips Popen's own wait)
            if isinstance(e, subprocess.TimeoutExpired):
                raise CompileTimeoutError(device, name, stdin, f"{Path(args[0]).name} ran past the compiler's time "
                                          f"limit of {timeout:g} s and was killed (UOPVIZ_COMPILE_TIMEOUT sets "
                                          "the limit in seconds)") from None
            raise
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def cpu_name() -> str:
    """The processor's model name (what -march=native compiles for), else its architecture."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def find_compiler() -> str:
    """The C compiler to use; DeviceUnavailableError saying how to get one if there is none."""
    cc = os.environ.get("CC")
    candidates = [cc] if cc else ["gcc", "clang", "cc"]
    for c in candidates:
        path = shutil.which(c)
        if path:
            return path
    raise DeviceUnavailableError(
        f"the CPU device needs a C compiler and found none ({'$CC=' + cc if cc else 'tried gcc, clang, cc'}); "
        "install one (e.g. apt-get install gcc) or set CC to its path")


PREFETCHED_STRIDE = 2048
"""The stride in bytes an x86 core's prefetchers still follow (Target.prefetch, codegen/prefetch.py): Intel's L1
IP-stride prefetcher detects strides up to 2 KiB, and beyond that nearly every step is a new 4 KiB page, where the
L2 streamer stops."""


def l1_cache() -> Cache:
    """The first-level data cache of the processor the kernels run on, as Linux describes it; where it does not
    (another system, a container hiding /sys), a common x86 core's: 32 KiB, 8 ways of 64-byte lines."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in sorted(root.glob("index*")):
            def read(name: str, d: Path = d) -> str:
                return (d / name).read_text().strip()
            if read("level") == "1" and read("type") in ("Data", "Unified"):
                geometry = (int(read("coherency_line_size")), int(read("number_of_sets")),
                            int(read("ways_of_associativity")))
                if min(geometry) > 0:
                    return Cache(*geometry)
    except (OSError, ValueError):
        pass
    return Cache(64, 64, 8)


class CPURuntime(Runtime):
    def __init__(self, index: str | None = None) -> None:
        """The CPU (kernels split THREAD axes over every core), or `CPU:index`: memory and programs of its own and
        one thread, so that each shard of a multi-device tensor runs on a core of its own."""
        if index is not None and not index.isdigit():
            raise UnknownDeviceError(f"CPU:{index}: a CPU device's index is a number (CPU:0, CPU:1, ...)")
        self.name = "CPU" if index is None else f"CPU:{index}"
        self.target = Target(self.name, dialect=C, native=frozenset({Ops.SQRT}), global_dims=0,
                             threads=workers.cores() if index is None else 1, vectors=frozenset({2, 4, 8, 16}),
                             fma=True, l1=l1_cache(), private_memory=STACK_BYTES,
                             prefetch=PREFETCHED_STRIDE)
        self.cc = find_compiler()
        self._libs: weakref.WeakValueDictionary[str, ctypes.CDLL] = weakref.WeakValueDictionary()  # in use

    @cached_property
    def compiler_version(self) -> str:
        out = run_compiler([self.cc, "--version"], "", self.name, "--version")
        return (out.stdout.splitlines() or [self.cc])[0].strip()

    def describe(self) -> dict[str, str]:
        return {"device": self.name, "name": cpu_name(), "threads": str(self.target.threads),
                "driver": f"{platform.system()} {platform.machine()}",
                "compiler": Path(self.cc).name, "compiler_version": self.compiler_version, "flags": " ".join(FLAGS)}

    def alloc(self, size: int, dtype: DType) -> Any:
        return aligned_empty(max(size, 1), dtypes.storage_numpy(dtype))

    def copyin(self, handle: Any, data: Any) -> None:
        handle[: data.size] = data

    def copyout(self, handle: Any, size: int, dtype: DType) -> Any:
        return handle[:size].view(_memory_class().__base__).copy()  # a plain ndarray, not alloc's subclass

    def library(self, source: str, name: str) -> Path:
        """The shared library for source, from the disk cache or compiled into it. The source must be as the
        renderer writes it (UntrustedSourceError otherwise): the compiler reads no file that a text names."""
        check_source(source, self.name, name)
        return self._library(source, name)

    def _library(self, source: str, name: str, shown: str | None = None) -> Path:
        """The shared library for source, trusted as it is (the worker pool's own C, which includes headers, or a
        kernel's `unit`); a CompileError shows `shown` (default: source) as the source that failed.

        A cached library is used only if its bytes still hash to the digest written beside it: loading a
        truncated or damaged one would crash the process (SIGBUS), so such a file is compiled again. The digest
        detects damage, not tampering: that is the trusted folders' part (runtime/trust.py).
        """
        key = self._key(source)
        if (found := _cached(key)) is not None:
            return found
        folder = _writable_library_dir()
        tmp = self._compile(source, folder, flags(source), name, shown)
        try:
            return _install(tmp, [key])[0]
        finally:
            tmp.unlink(missing_ok=True)

    def _key(self, source: str) -> str:
        """The name source's library is cached under: its source, the compiler and the flags."""
        return hashlib.sha256("\0".join([source, self.compiler_version, *flags(source)]).encode()).hexdigest()[:32]

    def _compile(self, source: str, folder: Path, args: tuple[str, ...], name: str, shown: str | None = None) \
            -> Path:
        """source compiled with args into a new file in folder (the caller installs and removes it); CompileError
        (showing `shown`, default source) where the compiler fails."""
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        try:
            proc = run_compiler([self.cc, *args, "-x", "c", "-", "-o", tmp, "-lm"], source, self.name, name)
            if proc.returncode != 0:
                raise CompileError(self.name, name, source if shown is None else shown, proc.stderr or proc.stdout)
            os.chmod(tmp, 0o700)  # the linker gives the umask's mode: group-writable where the umask is 002
        except BaseException:
            os.unlink(tmp)
            raise
        return Path(tmp)

    def libraries(self, kernels: Sequence[Kernel]) -> None:
        """Compile the libraries of kernels that the disk cache lacks in as few compiler runs as may be: one
        translation unit per set of flags, each kernel in it as `unit` writes it (its exported and static names its
        own), linked into one library that every kernel of the batch is cached under (hard links: a kernel found
        later loads it as its own). A C compiler run has a fixed cost (driver, assembler, linker) larger than most
        kernels' own (a GPT training step's 158 kernels took 2.5x the CPU time one by one).
        A batch the compiler refuses is left alone: each of its kernels compiles by itself when it is loaded
        (kernel_library), and a bad one raises its own error then."""
        if any(k.threads > 1 for k in kernels):
            _ = self._workers_library  # the pool's own library too, before the first THREAD kernel waits on it
        batches: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
        seen: set[str] = set()
        for kernel in kernels:
            if kernel.source is None:
                continue
            source = self._source(kernel)
            try:
                check_source(source, self.name, kernel.name)
            except CompileError:
                continue
            text = unit(source, kernel.name)
            key = self._key(text)
            if key in seen or _cached(key) is not None:
                continue
            seen.add(key)
            batches.setdefault(flags(source), []).append((key, text, kernel.name))
        for args, members in batches.items():
            folder = _writable_library_dir()
            try:
                tmp = self._compile("".join(text for _, text, _ in members), folder, args,
                                    f"batch of {len(members)} kernels" if len(members) > 1 else members[0][2])
            except CompileError:
                continue
            try:
                _install(tmp, [key for key, _, _ in members])
            finally:
                tmp.unlink(missing_ok=True)

    def _source(self, kernel: Kernel) -> str:
        """What the kernel's library is compiled from: its source, and the pool's entry for a THREAD kernel."""
        assert kernel.source is not None
        return kernel.source + (workers.task_source(kernel) if kernel.threads > 1 else "")

    def kernel_library(self, kernel: Kernel) -> Path:
        """The kernel's library, from the disk cache or compiled into it, not loaded: what compile loads, and
        what CPURuntime.libraries compiled it into with others. Its entry points are named as `exported` says."""
        if kernel.source is None:
            raise CompileError(self.name, kernel.name, "", "the kernel has no C source")
        source = self._source(kernel)
        check_source(source, self.name, kernel.name)
        return self._library(unit(source, kernel.name), kernel.name, source)

    def compile(self, kernel: Kernel) -> Program:
        threads = kernel.threads
        path = self.kernel_library(kernel)
        lib = self._libs.get(str(path))
        if lib is None:
            lib = self._libs[str(path)] = load_library(path)
        # the library stays loaded while its program lives: a ctypes function pointer holds its library
        source = self._source(kernel)
        if threads > 1:  # the pool calls the kernel's task entry, which unpacks one array of arguments
            launch = self._pool_launch(getattr(lib, exported(source, f"{kernel.name}_task")), threads,
                                       len(kernel.params) + len(kernel.vars))
        else:
            launch = getattr(lib, exported(source, kernel.name))
            launch.argtypes = [ctypes.c_void_p] * len(kernel.params) + [ctypes.c_int] * len(kernel.vars)
            launch.restype = None

        def run(handles: list[Any], vals: tuple[int, ...] = (), wait: bool = False) -> float | None:
            try:  # the address alloc noted on each handle: a replay passes the same handles every step
                args = [h.address for h in handles]
            except AttributeError:  # an array alloc did not make (a view of one, a plain NumPy array)
                args = [_address(h) for h in handles]
            args += vals
            t0 = time.perf_counter()
            launch(*args)  # one call into C: Ctrl-C's handler runs only after it returns, when every index is done
            return time.perf_counter() - t0 if wait else None

        return run

    def _pool_launch(self, entry: Any, threads: int, count: int) -> Callable[..., None]:
        """A call of the pool's for a THREAD kernel's task entry (whose `count` arguments go in one array): what
        does not change between calls (the entry's address, the array's type, the pool's path) made here, once."""
        task = ctypes.c_void_p(ctypes.cast(entry, ctypes.c_void_p).value)
        array = ctypes.c_longlong * count
        library = str(self._workers_library)

        def launch(*args: int, _held: Any = entry) -> None:  # held: the address is valid while its library is loaded
            workers.pool(library).run(task, array(*args), threads)
        return launch

    @cached_property
    def _workers_library(self) -> Path:
        """The worker pool's library, compiled and cached like a kernel's."""
        return self._library(workers.SOURCE, "uopviz_pool")


ALIGNMENT = 64
"""Bytes every buffer starts on: a cache line, and an AVX-512 vector. NumPy's own arrays start 16 bytes past a page
for large sizes, so each vector load of a 16-float panel straddled two lines (gemm 512's matmul ran 10% slower)."""


def aligned_empty(size: int, dtype: Any) -> Any:
    """An uninitialised NumPy array of `size` elements whose data starts on an ALIGNMENT boundary: a view into a
    slightly larger byte array (its `base`; views of it refer to that base too, which the memory pool checks),
    carrying its data's address as `address` (what a program passes the kernel; views of it do not carry it)."""
    import numpy as np
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(size * itemsize + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    out = raw[start:start + size * itemsize].view(dtype).view(_memory_class())
    out.address = _address(out)
    return out


@functools.cache
def _memory_class() -> type:
    """The class of alloc's arrays: an ndarray that holds its address, noted once (`_address` per buffer per launch
    was 0.3 us: a thousand handles a GPT training step, eager or replayed by @jit). Made on first use, as NumPy is
    imported."""
    import numpy as np

    class AddressedArray(np.ndarray):
        address: int
    return AddressedArray


def _cached(key: str) -> Path | None:
    """The library cached under key whose bytes are intact, where there is one."""
    file = f"{key}.so"
    for folder in _library_dirs():
        if _intact(folder, file):
            return folder / file
    return None


def _install(tmp: Path, keys: Sequence[str]) -> list[Path]:
    """The compiled library tmp cached under each of keys (beside it, in its folder), its digest written first:
    the first key's a hard link of tmp, and the others hard links of that (a copy where links are refused);
    atomic, so a concurrent process sees a whole library or none."""
    digest = _digest(tmp.read_bytes()).encode()
    paths = []
    for key in keys:
        path = tmp.parent / f"{key}.so"
        _write_atomically(_digest_path(path), digest)
        link = tmp.with_name(f"{tmp.name}.{key}")
        try:
            try:
                os.link(tmp, link)
            except OSError:
                shutil.copyfile(tmp, link)
                os.chmod(link, 0o700)
            os.replace(link, path)
        finally:
            link.unlink(missing_ok=True)
        paths.append(path)
    return paths


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest_path(lib: Path) -> Path:
    return lib.with_suffix(".sha256")


def _intact(folder: Path, file: str) -> bool:
    """Whether folder holds the library `file` whose bytes hash to the digest written beside it when it was built.
    Both are read through descriptors of the folder and files open_checked checked: CacheTrustError for one that
    another user could have written, never a library loaded from it."""
    try:
        at = open_checked(folder, directory=True)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        with os.fdopen(open_checked(folder / file, dir_fd=at), "rb") as lib, \
                os.fdopen(open_checked(_digest_path(folder / file), dir_fd=at), "rb") as digest:
            st = os.fstat(lib.fileno())
            seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, digest.read())
            if seen in _verified:
                return True
            if seen[-1] != _digest(lib.read()).encode():
                return False
            _verified.add(seen)
            return True
    except OSError:  # missing, or unreadable: build it again
        return False
    finally:
        os.close(at)


_verified: set[tuple[int, int, int, int, bytes]] = set()
"""Libraries this process found intact (file identity, size, modification time and digest): a batch's library is
cached under each of its kernels' names, and hashing it once per kernel read it whole each time."""


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_fallback_dir: list[Path] = []  # this process's temporary library folder, once the cache proved unwritable


def _library_dirs() -> list[Path]:
    """Where compiled libraries may already be: the cache (its folder checked where it exists: CacheTrustError if
    another user could write it), and this process's temporary folder if it has one."""
    root = cache_dir()
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.close(open_checked(root, directory=True))
    return [root / "cpu", *_fallback_dir]


def _writable_library_dir() -> Path:
    """The cache's library folder (created 0700; CacheTrustError where it or the cache is not trusted), or (said
    once) a temporary folder for this process when the cache cannot be written: a read-only cache slows each
    process down but stops nothing."""
    folder = cache_dir() / "cpu"
    try:
        trusted_dir(folder.parent)
        trusted_dir(folder)
        with tempfile.TemporaryFile(dir=folder):  # permissions, a read-only mount, a full disk: try it
            return folder
    except OSError as e:
        why = e.strerror or str(e)
    if not _fallback_dir:
        tmp = Path(tempfile.mkdtemp(prefix="uopviz-cpu-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        _fallback_dir.append(tmp)
        print(f"uopviz: warning: the kernel cache {folder} cannot be written ({why}); compiled kernels go to {tmp} "
              "for this process only (set UOPVIZ_CACHE_DIR to a writable folder to keep them)", file=sys.stderr)
    return _fallback_dir[0]


def _address(handle: Any) -> int:
    """The address of a buffer's memory (a writable NumPy array, as alloc made it): through a ctypes view of its
    buffer, four times cheaper than `ndarray.ctypes.data`, which matters when a JIT replays small kernels."""
    return ctypes.addressof(ctypes.c_char.from_buffer(handle))
