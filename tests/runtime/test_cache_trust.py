"""The compiled-kernel cache is trusted as the user's home is (issue 28): another user who can write the cache plants
a library (and rewrites the digest beside it), and the next run of that kernel must refuse it, not run it. The
planted library writes a marker file when it is loaded, so a test sees whether it ran."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from planted import evil_library, one

from uopviz.dtype import dtypes
from uopviz.runtime import workers
from uopviz.runtime.cpu import CPURuntime
from uopviz.runtime.trust import CacheTrustError
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user (uid 65534): "
                                                       "the tests run as root here and in CI")

THREADED = """void fill(float* restrict data0, int tidx0) { data0[tidx0] = (float)tidx0; }
"""


def threaded() -> Kernel:
    return Kernel("fill", UOp(Ops.LINEAR, ()), THREADED, (dtypes.float32,), threads=4)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def evil(tmp_path: Path) -> tuple[bytes, Path]:
    """A library that, once loaded, writes a marker file; and that marker's path."""
    return evil_library(tmp_path)


def plant(lib: Path, data: bytes) -> None:
    """What the attacker of issue 28 did: the library replaced, and the digest beside it rewritten to match."""
    lib.unlink()
    lib.write_bytes(data)
    lib.with_suffix(".sha256").write_text(hashlib.sha256(data).hexdigest())


def world_writable(p: Path) -> None:
    p.chmod(0o777)


def group_writable(p: Path) -> None:
    p.chmod(0o770)


def another_users_folder(p: Path) -> None:
    for q in [p, *p.iterdir()]:
        os.chown(q, NOBODY, NOBODY)


def another_users_files(p: Path) -> None:
    for q in p.iterdir():
        os.chown(q, NOBODY, NOBODY)


TAMPER: list[object] = [world_writable, group_writable, pytest.param(another_users_folder, marks=as_root),
                        pytest.param(another_users_files, marks=as_root)]


@pytest.mark.parametrize("tamper", TAMPER)
def test_a_planted_kernel_library_is_refused_not_run(cache: Path, evil: tuple[bytes, Path],
                                                     tamper: Callable[[Path], None]) -> None:
    data, marker = evil
    lib = CPURuntime().kernel_library(one())  # the victim's earlier run cached it
    plant(lib, data)
    tamper(lib.parent)
    with pytest.raises(CacheTrustError, match="another user could put code there"):
        CPURuntime().compile(one())  # a new process, as the victim's next run
    assert not marker.exists()


@pytest.mark.parametrize("tamper", TAMPER)
def test_a_planted_worker_pool_library_is_refused_not_run(cache: Path, evil: tuple[bytes, Path],
                                                          tamper: Callable[[Path], None]) -> None:
    data, marker = evil
    pool = CPURuntime()._workers_library
    plant(pool, data)
    tamper(pool.parent)
    with pytest.raises(CacheTrustError):
        workers.Workers(pool, 2)  # loading it directly is refused as well
    rt = CPURuntime()
    with pytest.raises(CacheTrustError):
        rt.compile(threaded())([rt.alloc(4, dtypes.float32)])  # the pool's library is loaded at the first call
    assert not marker.exists()


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_cache_folder_others_may_write_is_refused_with_the_fix(cache: Path, mode: int) -> None:
    cache.mkdir(mode=0o700)
    cache.chmod(mode)
    with pytest.raises(CacheTrustError) as e:
        CPURuntime().compile(one())
    assert f"chmod -R go-w {cache}" in str(e.value) and f"mode {mode:04o}" in str(e.value)
    assert not (cache / "cpu").exists()


@as_root
def test_a_cache_folder_of_another_user_is_refused(cache: Path) -> None:
    cache.mkdir(mode=0o700)
    os.chown(cache, NOBODY, NOBODY)  # made first by another user, as in a shared /tmp
    with pytest.raises(CacheTrustError, match=r"owned by .*uid 65534.*not by you"):
        CPURuntime().compile(one())
    assert not (cache / "cpu").exists()


def test_a_fresh_cache_is_created_0700_with_its_parents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("UOPVIZ_CACHE_DIR", str(cache))
    old = os.umask(0o002)  # a umask that would make them group-writable
    try:
        rt = CPURuntime()
        rt.compile(one())
        rt.compile(threaded())([rt.alloc(4, dtypes.float32)])  # the worker pool's library too
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", cache, cache / "cpu"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    files = list((cache / "cpu").iterdir())
    assert len(files) == 6  # two kernels and the pool: a library and its digest each, no temporary left
    assert all(f.stat().st_uid == os.geteuid() and not f.stat().st_mode & 0o077 for f in files)


def test_a_fifo_or_link_in_place_of_a_library_is_refused_without_waiting(cache: Path, tmp_path: Path) -> None:
    lib = CPURuntime().kernel_library(one())
    lib.unlink()
    os.mkfifo(lib, 0o600)  # opened for reading it would block until a writer came
    with pytest.raises(CacheTrustError, match="not a regular file"):
        CPURuntime().compile(one())
    lib.unlink()
    (tmp_path / "elsewhere").write_bytes(b"not a library")
    lib.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CacheTrustError, match="symbolic link"):
        CPURuntime().compile(one())


def test_a_trusted_cache_still_rebuilds_a_damaged_library(cache: Path) -> None:
    """The digest stays as what it can be: a check against damage (a truncated file would crash the load)."""
    lib = CPURuntime().kernel_library(one())
    lib.write_bytes(lib.read_bytes()[:100])
    out = CPURuntime()
    buf = out.alloc(1, dtypes.float32)
    out.compile(one())([buf])
    assert buf[0] == 1.0 and lib.stat().st_size > 100
