"""What an attacker of issue 28 plants in a kernel cache, for the cache-trust tests (tests/runtime/test_cache_trust.py)
and the two-user probe (tests/security/test_two_users.py): a kernel the victim compiles, and a library that, once
loaded, writes a marker file, so a test sees whether it ran."""

from __future__ import annotations

import subprocess
from pathlib import Path

from uopviz.dtype import dtypes
from uopviz.runtime.cpu import find_compiler
from uopviz.target import Kernel
from uopviz.uop.ops import Ops, UOp

ONE = """void one(float* restrict data0) { data0[0] = 1.0f; }
"""


def one() -> Kernel:
    return Kernel("one", UOp(Ops.LINEAR, ()), ONE, (dtypes.float32,))


def evil_library(folder: Path) -> tuple[bytes, Path]:
    """A library, built in folder, that writes a marker file there when it is loaded: its bytes and the marker's
    path."""
    marker = folder / "ran"
    src = folder / "evil.c"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void evil(void) {\n'
                   f'  FILE* f = fopen("{marker}", "w"); if (f) {{ fputs("planted code ran", f); fclose(f); }}\n}}\n')
    lib = folder / "evil.so"
    subprocess.run([find_compiler(), "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    return lib.read_bytes(), marker
