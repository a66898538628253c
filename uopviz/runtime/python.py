"""The PYTHON runtime: an interpreter of Linear programs, slow by nature but the reference for every other backend.

Memory is 1-D NumPy arrays. `compile` translates a kernel's Linear instruction list once into a list of small
closures over one value list (a slot per instruction), with loop and branch targets resolved up front, so the
hot loop only calls closures. Scalar semantics come from `uopviz.uop.alu`, the definition constant folding uses,
so the two cannot disagree. Unlike a compiled backend it checks every memory access and reports integer division
by zero, naming the kernel and the instruction: catching a wrong index is what a reference is for.

A Wmma (tensor cores) is a warp's collective: each work-item hands in its fragments and pauses, as at a barrier;
the warp's last one computes D = A·B + C from all of them by the config's layout (codegen/tc.py) and hands each
its lanes of D.
"""

from __future__ import annotations

import itertools
import math
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from uopviz.codegen.rowcache import STACK_BYTES
from uopviz.codegen.tc import coordinates, elements, threads
from uopviz.dtype import DType, dtypes
from uopviz.runtime.device import CompileError, DeviceError, Runtime, UnknownDeviceError
from uopviz.target import Kernel, Target
from uopviz.uop.alu import bitcast, evaluate, exec_alu
from uopviz.uop.ops import AddrSpace, GroupOp, Ops, UOp
from uopviz.uop.printer import one_line

Step = Callable[[list[Any]], int | None]
"""One instruction: updates the value list; returns None to fall through, a step index to jump, ~index to pause
at a barrier and resume there."""

_PASSIVE = frozenset({Ops.CONST, Ops.PARAM, Ops.DEFINE_VAR, Ops.SPECIAL, Ops.AFTER, Ops.INDEX, Ops.STACK, Ops.GROUP,
                      Ops.SINK, Ops.ENDIF, Ops.PREFETCH})
"""Instructions with no run-time action: their values are filled in before the run, aliased, or fused into users (a
Prefetch is a hint to a cache this interpreter does not have)."""
_DONE = object()


class ExecutionError(DeviceError):
    """A kernel did something undefined while running (out-of-range access, integer division by zero)."""


class PythonRuntime(Runtime):
    """NumPy memory and an interpreter for programs; every decomposed op is computed directly (exec_alu has it)."""

    def __init__(self, index: str | None = None) -> None:
        """PYTHON, or `PYTHON:index`: an interpreter with memory of its own (a device of a multi-device tensor)."""
        if index is not None and not index.isdigit():
            raise UnknownDeviceError(f"PYTHON:{index}: the interpreter's index is a number (PYTHON:0, PYTHON:1, ...)")
        self.name = "PYTHON" if index is None else f"PYTHON:{index}"
        # work-groups as a typical GPU has them (the interpreter runs a group's work-items in turns between barriers)
        self.target = Target(self.name, dialect=None, native=GroupOp.Decomposed, global_dims=0, local_dims=3,
                             max_local=1024, local_memory=64 * 1024, private_memory=STACK_BYTES)

    def alloc(self, size: int, dtype: DType) -> np.ndarray:
        return np.zeros(size, _values(dtype))

    def copyin(self, handle: np.ndarray, data: Any) -> None:
        """data in the host form every runtime shares (dtypes.storage_numpy): bfloat16 arrives as 16-bit patterns,
        which become the float32 values the interpreter holds."""
        a = np.asarray(data).reshape(-1)
        if handle.dtype == np.float32 and a.dtype == np.uint16:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        handle[...] = a.astype(handle.dtype, copy=False)

    def copyout(self, handle: np.ndarray, size: int, dtype: DType) -> np.ndarray:
        """The contents in the shared host form: bfloat16 as its 16-bit patterns (the values are rounded already,
        so the top half of each float32 is exact)."""
        if dtype.name == "bfloat16":
            return (handle[:size].view(np.uint32) >> 16).astype(np.uint16)
        if dtype.is_float and dtype.itemsize == 1:
            return dtypes.fp8_to_bits(handle[:size], dtype)
        return np.array(handle[:size], dtype=_values(dtype))

    def compile(self, kernel: Kernel) -> PythonProgram:
        return PythonProgram(kernel)

    def describe(self) -> dict[str, str]:
        return {"device": self.name, "python": platform.python_version(), "numpy": np.__version__,
                "compiler": "uopviz interpreter",
                "compiler_version": f"Python {platform.python_version()}, NumPy {np.__version__}"}


class PythonProgram:
    """A kernel's Linear program translated to steps; call it as `prog(handles, vals=(), wait=False)`.

    Hardware ids (SPECIAL gidx*/lidx*) run the program once per grid point, gidx0 fastest. The threads of one
    work-group (its lidx points) take turns between BARRIERs and share its LOCAL buffers, as on a GPU.
    """

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        lin = kernel.linear
        if lin.op is not Ops.LINEAR:
            raise CompileError("PYTHON", kernel.name, "", f"expected a Linear program, got {lin.op.value}")
        self._instrs = lin.src
        self._shared = len(lin.src)  # the slot holding the work-group's LOCAL buffers
        self._template: list[Any] = [None] * (len(lin.src) + 1)
        self._params: list[tuple[int, int, tuple[UOp, ...]]] = []  # (position, slot, shape dims)
        self._vars: list[tuple[int, UOp]] = []
        self._specials: list[tuple[int, UOp]] = []
        self._steps: list[Step] = []
        self._step_pos: list[int] = []  # instruction position of each step
        self._translate()

    # ---- translation ----
    def _fail(self, i: int, msg: str) -> CompileError:
        listing = "\n".join(one_line(u) for u in self._instrs)
        return CompileError("PYTHON", self.kernel.name, listing, f"instruction {i + 1}: {msg}")

    def _translate(self) -> None:
        instrs = self._instrs
        step_at = list(itertools.accumulate((_steps_of(u) for u in instrs), initial=0))
        # where each Range's End and each If's Endif is: a zero-trip loop or a false If jumps past it
        closer = {u.src[1] if u.op is Ops.END else u.src[0]: i for i, u in enumerate(instrs)
                  if u.op in (Ops.END, Ops.ENDIF)}
        slot: dict[UOp, int] = {}
        addr: dict[UOp, tuple[int, int, str, DType]] = {}  # Index -> (buffer slot, index slot, buffer name, dtype)

        def val(i: int, s: UOp) -> int:
            if s not in slot:
                raise self._fail(i, f"{instrs[i].op.value} uses {one_line(s)}, which has no value before it")
            return slot[s]

        for i, u in enumerate(instrs):
            op = u.op
            if op is Ops.CONST:
                self._template[i] = u.arg.value
            elif op is Ops.PARAM:
                if u.arg.slot >= len(self.kernel.params):
                    raise self._fail(i, f"Param slot {u.arg.slot} but the kernel has {len(self.kernel.params)} params")
                self._params.append((i, u.arg.slot, u.src[0].src))
            elif op is Ops.DEFINE_VAR:
                if u.arg.name not in self.kernel.vars:
                    raise self._fail(i, f"variable {u.arg.name!r} is not among the kernel's vars {self.kernel.vars}")
                self._vars.append((i, u))
            elif op is Ops.SPECIAL:
                self._specials.append((i, u))
            elif op is Ops.AFTER:  # the value of src[0]: share its slot (or its address)
                if u.src[0] in addr:
                    addr[u] = addr[u.src[0]]
                else:
                    slot[u] = val(i, u.src[0])
                continue
            elif op is Ops.INDEX and u.src[0].op is Ops.WMMA:  # a lane of a Wmma's result
                self._steps.append(_lane(i, val(i, u.src[0]), int(u.src[1].arg.value)))
                self._step_pos.append(i)
            elif op is Ops.WMMA:
                self._steps += self._wmma(i, u, val, step_at)
                self._step_pos += [i, i]
            elif op is Ops.INDEX:
                base = u.src[0].memory()
                if base.op not in (Ops.PARAM, Ops.BUFFER) or len(u.src) != 2:
                    raise self._fail(i, "Index must be (Param or Buffer, one index)")
                desc = f"Param {base.arg.slot}" if base.op is Ops.PARAM else \
                    f"{base.arg.addrspace.name} Buffer {base.arg.uid}"
                addr[u] = (val(i, u.src[0]), val(i, u.src[1]), desc, base.arg.dtype)
                continue
            elif op in _PASSIVE:
                continue
            else:
                self._steps.append(self._step(i, u, val, addr, step_at, closer))
                self._step_pos.append(i)
            slot[u] = i

    def _step(self, i: int, u: UOp, val: Callable[[int, UOp], int],
              addr: dict[UOp, tuple[int, int, str, DType]], step_at: list[int], closer: dict[UOp, int]) -> Step:
        op, src = u.op, u.src
        if op in GroupOp.Elementwise:
            return _alu(op, u.dtype, i, tuple(val(i, s) for s in src))
        if op is Ops.BITCAST:
            return _bitcast(src[0].dtype, u.dtype, i, val(i, src[0]))
        if op is Ops.RANGE:
            if u not in closer:
                raise self._fail(i, "Range has no End")
            return _range(i, val(i, src[0]), step_at[closer[u] + 1])
        if op is Ops.END:
            return _end(val(i, src[1]), val(i, src[1].src[0]), step_at[val(i, src[1]) + 1])
        if op is Ops.IF:
            if u not in closer:
                raise self._fail(i, "If has no Endif")
            return _if(val(i, src[0]), step_at[closer[u] + 1])
        if op is Ops.BARRIER:
            return _barrier(step_at[i + 1])
        if op is Ops.BUFFER:
            if u.arg.addrspace is AddrSpace.GLOBAL:
                raise self._fail(i, "a GLOBAL Buffer inside a kernel; kernels reach global memory through Params")
            npdt = _values(u.arg.dtype)
            return _local(i, u.arg.size, npdt, self._shared) if u.arg.addrspace is AddrSpace.LOCAL \
                else _reg(i, u.arg.size, npdt)
        if op in (Ops.LOAD, Ops.STORE):
            if src[0] not in addr:
                raise self._fail(i, f"{op.value} uses {one_line(src[0])}, which has no value before it"
                                 if src[0].op is Ops.INDEX else f"{op.value} must address memory through an Index")
            b, x, desc, dt = addr[src[0]]
            where = f"kernel {self.kernel.name}, instruction {i + 1} ({op.value})"
            gate = val(i, src[2]) if len(src) > 2 else None
            if op is Ops.LOAD:
                return _load(i, b, x, val(i, src[1]) if gate is not None else 0, gate, f"{where} reads {desc}")
            conv = None if src[1].dtype == dt else dt.normalize
            return _store(b, x, val(i, src[1]), conv, gate, f"{where} writes {desc}")
        raise self._fail(i, f"the PYTHON interpreter cannot run {op.value}")

    def _wmma(self, i: int, u: UOp, val: Callable[[int, UOp], int], step_at: list[int]) -> list[Step]:
        """Two steps: hand in this work-item's fragments and pause; on resuming, check the warp's result came."""
        tc = u.arg
        if not any(x.arg == "lidx0" for x in self._instrs if x.op is Ops.SPECIAL) or \
                [s.shape for s in u.src] != [(elements(x),) for x in (tc.a, tc.b, tc.c)]:
            raise self._fail(i, f"Wmma {tc.name} needs work-groups (lidx) and fragments of "
                                f"{[elements(x) for x in (tc.a, tc.b, tc.c)]} elements")
        reads = [[(val(i, x), None) for x in s.src] if s.op is Ops.STACK else
                 [(val(i, s), k) for k in range(elements(layout))] for s, layout in zip(u.src, (tc.a, tc.b, tc.c))]
        shared, lanes, name = self._shared, threads(tc), self.kernel.name

        def linear_id(v: list[Any]) -> int:
            """The work-item's place in its group, lidx0 fastest (as CUDA numbers threads into warps)."""
            out, stride = 0, 1
            for j, x in sorted((t for t in self._specials if t[1].arg.startswith("lidx")), key=lambda t: t[1].arg):
                out, stride = out + v[j] * stride, stride * int(x.src[0].arg.value)
            return out

        def hand_in(v: list[Any]) -> int:
            lane, warp = divmod(linear_id(v), lanes)[::-1]
            waiting = v[shared].setdefault(("wmma", i, warp), {})
            waiting[lane] = (v, [[v[j] if k is None else v[j][k] for j, k in r] for r in reads])
            v[i] = None
            if len(waiting) == lanes:
                del v[shared][("wmma", i, warp)]
                for (tv, _), d in zip(waiting.values(), _mma(tc, {ln: f for ln, (_, f) in waiting.items()}).values()):
                    tv[i] = d
            return ~(step_at[i] + 1)

        def collect(v: list[Any]) -> None:
            if v[i] is None:
                lane, warp = divmod(linear_id(v), lanes)[::-1]
                raise ExecutionError(f"kernel {name}, instruction {i + 1} (Wmma {tc.name}): lane {lane} of warp "
                                     f"{warp} waited alone; all {lanes} lanes of a warp must reach a Wmma together")
        return [hand_in, collect]

    # ---- running ----
    def __call__(self, handles: Sequence[Any], vals: Sequence[int] = (), wait: bool = False) -> float | None:
        t0 = time.perf_counter()
        k = self.kernel
        if len(vals) != len(k.vars):
            raise ValueError(f"kernel {k.name} takes {len(k.vars)} vars {k.vars}, got {len(vals)} values")
        env = dict(zip(k.vars, (int(x) for x in vals)))
        base = self._template.copy()
        for i, u in self._vars:
            if not u.arg.min <= env[u.arg.name] <= u.arg.max:
                raise ValueError(f"kernel {k.name}: {u.arg.name}={env[u.arg.name]} is outside [{u.arg.min}, "
                                 f"{u.arg.max}]")
            base[i] = env[u.arg.name]
        for i, s, dims in self._params:
            base[i] = self._param_view(handles, s, dims, env)
        groups = sorted((u for u in self._specials if not u[1].arg.startswith("lidx")), key=lambda x: x[1].arg)[::-1]
        lanes = sorted((u for u in self._specials if u[1].arg.startswith("lidx")), key=lambda x: x[1].arg)[::-1]
        sizes = {i: int(evaluate(u.src[0], env)) for i, u in self._specials}
        for gp in itertools.product(*(range(sizes[i]) for i, _ in groups)):
            wg = base.copy()
            wg[self._shared] = {}
            for (i, _), x in zip(groups, gp):
                wg[i] = x
            threads = []
            for lp in itertools.product(*(range(sizes[i]) for i, _ in lanes)):
                v = wg.copy()
                for (i, _), x in zip(lanes, lp):
                    v[i] = x
                threads.append(self._run(v))
            while threads:  # last work-item first: nothing may rely on work-item 0 running ahead (a GPU has no order)
                threads = [t for t in threads[::-1] if next(t, _DONE) is not _DONE][::-1]
        return time.perf_counter() - t0 if wait else None

    def _param_view(self, handles: Sequence[Any], s: int, dims: tuple[UOp, ...], env: dict[str, int]) -> np.ndarray:
        """The handle cut to the Param's declared size, so an access past the declared shape is caught too."""
        k = self.kernel
        if s >= len(handles):
            raise ValueError(f"kernel {k.name} reads Param {s} but got {len(handles)} buffers")
        h, want = handles[s], _values(k.params[s])
        size = math.prod(int(evaluate(d, env)) for d in dims)
        if not isinstance(h, np.ndarray) or h.dtype != want or h.ndim != 1 or h.size < size:
            got = f"{h.dtype} array of shape {h.shape}" if isinstance(h, np.ndarray) else type(h).__name__
            raise ValueError(f"kernel {k.name}: Param {s} needs a 1-D {want} array of at least {size} elements, "
                             f"got {got}")
        return h[:size]

    def _run(self, v: list[Any]) -> Iterator[None]:
        """One thread: runs the steps, pausing (yield) at each barrier."""
        steps, pc = self._steps, 0
        n = len(steps)
        try:
            while pc < n:
                nxt = steps[pc](v)
                if nxt is None:
                    pc += 1
                elif nxt >= 0:
                    pc = nxt
                else:
                    pc = ~nxt
                    yield
        except (ArithmeticError, ValueError, TypeError) as e:
            i = self._step_pos[pc]
            ids = "".join(f", {u.arg}={v[j]}" for j, u in self._specials)
            raise ExecutionError(f"kernel {self.kernel.name}, instruction {i + 1} ({one_line(self._instrs[i])}"
                                 f"{ids}): {type(e).__name__}: {e}") from e


def _steps_of(u: UOp) -> int:
    """How many steps an instruction translates to."""
    if u.op is Ops.WMMA:
        return 2
    if u.op is Ops.INDEX and u.src[0].op is Ops.WMMA:
        return 1
    return int(u.op not in _PASSIVE)


def _mma(tc: Any, fragments: dict[int, list[list[Any]]]) -> dict[int, tuple[float, ...]]:
    """D = A·B + C of a warp (lane -> its A, B and C fragments), returned as each lane's elements of D: the
    products exact and summed in float64, D rounded to the output dtype once."""
    m, n, k = tc.dims
    a, b, c = np.zeros((m, k)), np.zeros((k, n)), np.zeros((m, n))
    for lane, (fa, fb, fc) in fragments.items():
        for mat, layout, frag, (r, col) in ((a, tc.a, fa, "mk"), (b, tc.b, fb, "kn"), (c, tc.c, fc, "mn")):
            for e, x in enumerate(frag):
                at = coordinates(layout, lane, e)
                mat[at[r], at[col]] = x
    d = (a @ b + c).astype(_values(tc.dtype_out))
    out = {}
    for lane in fragments:
        spots = [coordinates(tc.c, lane, e) for e in range(elements(tc.c))]
        out[lane] = tuple(d[x["m"], x["n"]].item() for x in spots)
    return out


def _lane(o: int, w: int, k: int) -> Step:
    def step(v: list[Any]) -> None:
        v[o] = v[w][k]
    return step


# ---- step builders: each returns a closure over slot numbers (the hot loop calls nothing else) ----
def _alu(op: Ops, dt: DType, o: int, s: tuple[int, ...]) -> Step:
    if len(s) == 1:
        (a,) = s

        def step(v: list[Any]) -> None:
            v[o] = exec_alu(op, dt, (v[a],))
    elif len(s) == 2:
        a, b = s

        def step(v: list[Any]) -> None:
            v[o] = exec_alu(op, dt, (v[a], v[b]))
    else:
        def step(v: list[Any]) -> None:
            v[o] = exec_alu(op, dt, [v[x] for x in s])
    return step


def _bitcast(src: DType, dst: DType, o: int, a: int) -> Step:
    def step(v: list[Any]) -> None:
        v[o] = bitcast(v[a], src, dst)
    return step


def _range(o: int, bound: int, exit_: int) -> Step:
    def step(v: list[Any]) -> int | None:
        v[o] = 0
        return exit_ if v[bound] <= 0 else None
    return step


def _end(r: int, bound: int, back: int) -> Step:
    def step(v: list[Any]) -> int | None:
        c = v[r] = v[r] + 1
        return back if c < v[bound] else None
    return step


def _if(gate: int, skip: int) -> Step:
    def step(v: list[Any]) -> int | None:
        return None if v[gate] else skip
    return step


def _barrier(resume: int) -> Step:
    def step(v: list[Any]) -> int:
        return ~resume
    return step


def _reg(o: int, size: int, npdt: Any) -> Step:
    def step(v: list[Any]) -> None:
        v[o] = np.zeros(size, npdt)
    return step


def _local(o: int, size: int, npdt: Any, shared: int) -> Step:
    def step(v: list[Any]) -> None:
        mem = v[shared]
        if o not in mem:
            mem[o] = np.zeros(size, npdt)
        v[o] = mem[o]
    return step


def _out_of_range(what: str, i: int, size: int) -> ExecutionError:
    return ExecutionError(f"{what} at index {i}, outside its {size} elements [0, {size})")


def _load(o: int, b: int, x: int, alt: int, gate: int | None, what: str) -> Step:
    if gate is None:
        def step(v: list[Any]) -> None:
            arr, i = v[b], v[x]
            if not 0 <= i < len(arr):
                raise _out_of_range(what, i, len(arr))
            v[o] = arr.item(i)
    else:
        def step(v: list[Any]) -> None:
            if not v[gate]:
                v[o] = v[alt]
                return
            arr, i = v[b], v[x]
            if not 0 <= i < len(arr):
                raise _out_of_range(what, i, len(arr))
            v[o] = arr.item(i)
    return step


def _store(b: int, x: int, s: int, conv: Callable[[Any], Any] | None, gate: int | None, what: str) -> Step:
    def step(v: list[Any]) -> None:
        if gate is not None and not v[gate]:
            return
        arr, i = v[b], v[x]
        if not 0 <= i < len(arr):
            raise _out_of_range(what, i, len(arr))
        arr[i] = v[s] if conv is None else conv(v[s])
    return step


def _values(dt: DType) -> np.dtype:
    """NumPy dtype holding dt's values here: the interpreter keeps bfloat16 values (already rounded) as float32."""
    return dtypes.to_numpy(dtypes.float32 if dt.is_float and dt.fmt is None else dt)
