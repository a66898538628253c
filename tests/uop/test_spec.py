"""spec.py against SPEC.md: every op has a valid form that passes, and each rule rejects with its exact message."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from uopviz.codegen.tc import MMA_SYNC
from uopviz.dtype import dtypes
from uopviz.uop.ops import (
    AddrSpace,
    AxisType,
    BufferArg,
    ConstArg,
    LoadArg,
    Ops,
    ParamArg,
    RangeArg,
    ReduceArg,
    SliceArg,
    UOp,
    VarArg,
)
from uopviz.uop.spec import ARITY, SpecError, check, validate

f32, i32, f16, idx, b = dtypes.float32, dtypes.int32, dtypes.float16, dtypes.index, dtypes.bool


# Buffers with equal args are one node (hash-consing): F and G differ by tag. Short names read like SPEC's T, A, B.
def F() -> UOp:
    return UOp.buffer(12, f32)


def G() -> UOp:
    return UOp.buffer(12, f32, "CPU", AddrSpace.GLOBAL).replace(tag="g")


def I() -> UOp:  # noqa: E743
    return UOp.buffer(12, i32)


def fc(v: float = 2.0) -> UOp:
    return UOp.const(f32, v)


def ic(v: int = 3) -> UOp:
    return UOp.const(i32, v)


def bc(v: bool = True) -> UOp:
    return UOp.const(b, v)


def X() -> UOp:
    return F().reshape((3, 4))


def _store() -> UOp:
    r = UOp.range(12, 0)
    return F().index(r).store(G().index(r).load()).end(r)


def _fn() -> UOp:
    p0, p1 = UOp.param(0, (12,)), UOp.param(1, (12,))
    return UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (p0 + p1,)), F(), G()))


def _linear() -> UOp:
    r = UOp.range(4, 0)
    return UOp(Ops.LINEAR, (r.src[0], r, F(), F().index(r)))


# ---------------------------------------------------------------- (a) a valid form of every op
VALID: dict[Ops, Callable[[], UOp]] = {
    Ops.PARAM: lambda: UOp.param(0, (3, 4), f32, "CPU", AddrSpace.GLOBAL),
    Ops.BUFFER: lambda: UOp.buffer(8, f16, ("GPU:0", "GPU:1"), AddrSpace.GLOBAL),
    Ops.CONST: lambda: UOp.const(f16, 1.5),
    Ops.BINARY: lambda: UOp(Ops.BINARY, (), b"\x7fELF"),
    Ops.PERMUTE: lambda: X().permute((1, 0)),
    Ops.FLIP: lambda: X().flip((True, False)),
    Ops.RESHAPE: lambda: F().reshape((2, 3, 2)),
    Ops.EXPAND: lambda: F().reshape((1, 12)).expand((4, 12)),
    Ops.PAD: lambda: X().pad((1, 0), (5, 4)),
    Ops.SHRINK: lambda: X().shrink((1, 1), (2, 3)),
    Ops.INDEX: lambda: X().index(UOp.range(3, 0)),
    Ops.STACK: lambda: UOp(Ops.STACK, (F(), G())),
    Ops.REPLICATED: lambda: X().replicated((0,)),
    Ops.SLICE: lambda: UOp(Ops.SLICE, (F(), UOp.const(idx, 4)), SliceArg(16, dtypes.uint8)),
    Ops.BITCAST: lambda: F().bitcast(f16),
    Ops.REDUCE: lambda: X().reduce(Ops.MAX, axes=(1,)),
    Ops.FUNCTION: _fn,
    Ops.CALL: lambda: UOp(Ops.CALL, (UOp.sink(_store()), F(), G())),
    Ops.TUPLE: lambda: UOp(Ops.TUPLE, (F(), fc())),
    Ops.GETTUPLE: lambda: UOp(Ops.GETTUPLE, (_fn(),), 0),
    Ops.LOAD: lambda: F().load(G(), bc(), device="GPU", addrspace=AddrSpace.LOCAL),
    Ops.STORE: lambda: F().store(G() + fc(), UOp.const(b, True)),
    Ops.COPY: lambda: F().copy_to(("GPU:0", "GPU:1")),
    Ops.RANGE: lambda: UOp.range(UOp.variable("n", 1, 8), 0, AxisType.REDUCE),
    Ops.END: _store,
    Ops.AFTER: lambda: F().after(_store()),
    Ops.GROUP: lambda: UOp(Ops.GROUP, (_store(), F().store(G()))),
    Ops.SINK: lambda: UOp.sink(_store()),
    Ops.LINEAR: _linear,
    Ops.RECIP: lambda: F().recip(),
    Ops.TRUNC: lambda: I().trunc(),
    Ops.CAST: lambda: F().cast(i32),
    Ops.ADD: lambda: X() + fc(),
    Ops.MUL: lambda: X() * F().reshape((1, 12)).shrink((0, 0), (1, 4)),
    Ops.MAX: lambda: F().maximum(G()),
    Ops.MOD: lambda: I() % 4,
    Ops.IDIV: lambda: I() // ic(),
    Ops.CMPLT: lambda: F() < G(),
    Ops.CMPNE: lambda: F().ne(1.0),
    Ops.XOR: lambda: I() ^ ic(),
    Ops.OR: lambda: (F() < G()) | bc(),
    Ops.AND: lambda: I() & 7,
    Ops.SHR: lambda: I() >> 1,
    Ops.SHL: lambda: I() << 2,
    Ops.WHERE: lambda: (F() < G()).where(F(), 0.0),
    Ops.NEG: lambda: UOp(Ops.NEG, (F(),)),
    Ops.SUB: lambda: UOp(Ops.SUB, (F(), G())),
    Ops.DIV: lambda: UOp(Ops.DIV, (F(), fc())),
    Ops.CMPGT: lambda: UOp(Ops.CMPGT, (F(), G())),
    Ops.CMPGE: lambda: UOp(Ops.CMPGE, (I(), ic())),
    Ops.CMPLE: lambda: UOp(Ops.CMPLE, (F(), G())),
    Ops.CMPEQ: lambda: UOp(Ops.CMPEQ, (F(), G())),
    Ops.NOT: lambda: UOp(Ops.NOT, (F() < G(),)),
    Ops.EXP2: lambda: UOp(Ops.EXP2, (F(),)),
    Ops.LOG2: lambda: UOp(Ops.LOG2, (F(),)),
    Ops.SIN: lambda: UOp(Ops.SIN, (F(),)),
    Ops.SQRT: lambda: UOp(Ops.SQRT, (F(),)),
    Ops.POW: lambda: UOp(Ops.POW, (F(), fc())),
    Ops.MULACC: lambda: UOp(Ops.MULACC, (F(), G(), fc())),
    Ops.THREEFRY: lambda: UOp(Ops.THREEFRY, (UOp.buffer(4, dtypes.uint64), UOp.const(dtypes.uint64, 7))),
    Ops.CONTIGUOUS: lambda: UOp(Ops.CONTIGUOUS, (X().permute((1, 0)),)),
    Ops.CONTIGUOUS_BACKWARD: lambda: UOp(Ops.CONTIGUOUS_BACKWARD, (F(),)),
    Ops.DETACH: lambda: UOp(Ops.DETACH, (F(),)),
    Ops.BARRIER: lambda: UOp(Ops.BARRIER, (_store(),)),
    Ops.INS: lambda: UOp(Ops.INS, (fc(), fc()), ("vaddss", f32)),
    Ops.SPECIAL: lambda: UOp.special(16, "gidx0"),
    Ops.IF: lambda: UOp(Ops.IF, (UOp.special(16, "gidx0") < 12,)),
    Ops.ENDIF: lambda: UOp(Ops.ENDIF, (UOp(Ops.IF, (bc(),)),)),
    Ops.WMMA: lambda: UOp(Ops.WMMA, (UOp.buffer(8, f16), UOp.buffer(4, f16), UOp.buffer(4, f32)), MMA_SYNC[0]),
    Ops.CUSTOM: lambda: UOp(Ops.CUSTOM, (fc(),), ("sinf({0})", f32)),
    Ops.ATOMIC_ADD: lambda: UOp(Ops.ATOMIC_ADD, (F().index(UOp.special(12, "gidx0")), fc())),
    Ops.CUSTOM_FUNCTION: lambda: UOp(Ops.CUSTOM_FUNCTION, (), "hw_decode"),
    Ops.PROGRAM: lambda: UOp(Ops.PROGRAM, (_linear(), UOp(Ops.SOURCE, (), "void k(){}"),
                                           UOp(Ops.BINARY, (), b"\x00")), "k"),
    Ops.SOURCE: lambda: UOp(Ops.SOURCE, (), "void k(float* a) { a[0] = 1; }"),
    Ops.PREFETCH: lambda: UOp(Ops.PREFETCH, (F().index(UOp.special(12, "gidx0")),)),
    Ops.DEFINE_VAR: lambda: UOp.variable("n", 1, 8),
    Ops.BIND: lambda: UOp.variable("n", 1, 8).bind(8),
}


def test_every_op_has_a_valid_form() -> None:
    assert set(VALID) == set(Ops)


def test_every_op_has_an_arity() -> None:
    assert set(ARITY) == set(Ops)


@pytest.mark.parametrize("op", list(Ops), ids=lambda o: o.value)
def test_valid_form_passes(op: Ops) -> None:
    u = VALID[op]()
    assert u.op is op
    assert validate(u) is u


# ---------------------------------------------------------------- (b) each rule, with its exact message
def _err(u: Callable[[], UOp], msg: str, rule: str) -> None:
    with pytest.raises(SpecError, match="^" + re.escape(msg) + "$") as e:
        validate(u())
    assert e.value.rule == rule


P0 = lambda: UOp.param(0, (12,))  # noqa: E731
ERRORS: list[tuple[str, Callable[[], UOp], str, str]] = [
    # arity
    ("range-no-src", lambda: UOp(Ops.RANGE, (), RangeArg(0)), "Range: takes 1 source, got 0", "arity"),
    ("const-with-src", lambda: UOp(Ops.CONST, (fc(),), ConstArg(1.0, f32)), "Const: takes no sources, got 1",
     "arity"),
    ("index-no-idx", lambda: UOp(Ops.INDEX, (F(),)), "Index: takes at least 2 sources, got 1", "arity"),
    ("store-4-src", lambda: UOp(Ops.STORE, (F(), G(), bc(), bc())), "Store: takes 2 to 3 sources, got 4", "arity"),
    ("binary-1-src", lambda: UOp(Ops.ADD, (F(),)), "Add: takes 2 sources, got 1", "arity"),
    # arg types
    ("cast-arg", lambda: UOp(Ops.CAST, (F(),), "float"), "Cast: arg must be a DType, got 'float'", "arg-type"),
    ("add-arg", lambda: UOp(Ops.ADD, (F(), G()), 1), "Add: takes no arg, got 1", "arg-type"),
    ("permute-arg", lambda: UOp(Ops.PERMUTE, (X(),), (1.0, 0)),
     "Permute: arg must be a tuple of ints, got (1.0, 0)", "arg-type"),
    ("flip-arg", lambda: UOp(Ops.FLIP, (X(),), (1, 0)), "Flip: arg must be a tuple of bools, got (1, 0)",
     "arg-type"),
    ("gettuple-arg", lambda: UOp(Ops.GETTUPLE, (_fn(),), "0"), "GetTuple: arg must be an int, got '0'", "arg-type"),
    ("copy-arg", lambda: UOp(Ops.COPY, (F(),), ("GPU", 3)),
     "Copy: arg must be a device: a str or a tuple of str, got ('GPU', 3)", "arg-type"),
    ("range-arg", lambda: UOp(Ops.RANGE, (UOp.const(idx, 4),), RangeArg(0, "L")),  # type: ignore[arg-type]
     "Range: RangeArg needs an int idx >= 0 and an AxisType, got RangeArg(idx=0, type='L')", "range-arg"),
    # source ops
    ("buffer-size", lambda: UOp(Ops.BUFFER, (), BufferArg(0, f32)), "Buffer: size must be a positive int, got 0",
     "buffer-size"),
    ("buffer-void", lambda: UOp(Ops.BUFFER, (), BufferArg(4, dtypes.void)),
     "Buffer: dtype must be a non-void DType, got void", "buffer-dtype"),
    ("buffer-device", lambda: UOp(Ops.BUFFER, (), BufferArg(4, f32, ())),
     "Buffer: device must be a str or a non-empty tuple of str, got ()", "device"),
    ("param-slot", lambda: UOp(Ops.PARAM, (UOp.shape_src((4,)),), ParamArg(-1, f32)),
     "Param: slot must be a non-negative int, got -1", "param-slot"),
    ("const-type", lambda: UOp(Ops.CONST, (), ConstArg(1, f32)), "Const: value 1 is int, but float32 holds float",
     "const-type"),
    ("const-range", lambda: UOp(Ops.CONST, (), ConstArg(300, dtypes.uint8)),
     "Const: value 300 is not representable in uint8", "const-range"),
    ("const-f16", lambda: UOp(Ops.CONST, (), ConstArg(1e6, f16)), "Const: value 1000000.0 is not representable in "
     "float16", "const-range"),
    ("var-range", lambda: UOp(Ops.DEFINE_VAR, (), VarArg("n", 8, 1)),
     "DefineVar: range [8, 1] must be ints with min <= max", "var-range"),
    ("bind-range", lambda: UOp(Ops.BIND, (UOp.variable("n", 1, 8), UOp.const(dtypes.index, 9))),
     "Bind: value 9 is outside n's range [1, 8] (src[1] Const)", "bind-range"),
    ("bind-dtype", lambda: UOp(Ops.BIND, (UOp.variable("n", 1, 8), ic(2))),
     "Bind: value has dtype int32, the variable index (src[1] Const)", "bind-dtype"),
    ("bind-src", lambda: UOp(Ops.BIND, (UOp.const(idx, 1), UOp.const(idx, 1))),
     "Bind: source 0 must be a DefineVar, got Const (src[0] Const)", "src-op"),
    # movement (the shape rules surface from props.py)
    ("reshape-size", lambda: X().reshape((5, 3)), "Reshape: 12 elements cannot become (5, 3)", "reshape-size"),
    ("reshape-src", lambda: UOp(Ops.RESHAPE, (F(), UOp.const(idx, 12))),
     "Reshape: shape source must be a Stack of index scalars (src[1] Const)", "shape-source"),
    ("permute-perm", lambda: X().permute((0, 0)), "Permute: (0, 0) is not a permutation of the 2 axes of (3, 4)",
     "permutation"),
    ("flip-len", lambda: X().flip((True,)), "Flip: 1 flags for a shape of 2 axes (3, 4)", "flip-arity"),
    ("expand", lambda: X().expand((6, 4)), "Expand: cannot expand (3, 4) to (6, 4): each axis must be equal or 1",
     "expand"),
    ("pad-bounds", lambda: X().pad((2, 0), (4, 4)), "Pad: pad axis 0: offset 2 + 3 exceeds 4", "pad-bounds"),
    ("shrink-bounds", lambda: X().shrink((0, 2), (3, 3)), "Shrink: shrink axis 1: offset 2 + 3 exceeds 4",
     "shrink-bounds"),
    ("index-dtype", lambda: UOp(Ops.INDEX, (F(), fc())),
     "Index: index 0 has dtype float32; indices must be integers (src[1] Const)", "index-dtype"),
    ("index-arity", lambda: F().index(1, 2), "Index: 2 indices for a shape of 1 axes (12,)", "index-arity"),
    ("stack-dtype", lambda: UOp(Ops.STACK, (F(), I())),
     "Stack: operands must have the same dtype: float32 vs int32 (src[1] Buffer)", "same-dtype"),
    ("stack-shape", lambda: UOp(Ops.STACK, (F(), X())),
     "Stack: all shapes must match: (3, 4) vs (12,) (src[1] Reshape)", "stack-shapes"),
    ("replicated-dup", lambda: X().replicated((1, 1)), "Replicated: axes (1, 1) repeat an axis", "axes-range"),
    ("replicated-range", lambda: X().replicated((2,)), "Replicated: axes (2,) out of range for (3, 4)",
     "axes-range"),
    ("slice-bounds", lambda: UOp(Ops.SLICE, (F(), UOp.const(idx, 10)), SliceArg(3, f32)),
     "Slice: 3 x float32 at offset 10 x float32 needs 52 bytes, but the source has 48", "slice-bounds"),
    ("slice-offset", lambda: UOp(Ops.SLICE, (F(), ic(1)), SliceArg(3, f32)),
     "Slice: must be an index scalar, got int32 of shape () (src[1] Const)", "index-src"),
    ("bitcast-bytes", lambda: UOp.buffer(3, f32).bitcast(dtypes.float64),
     "Bitcast: (3,) of float32 (4 B) does not fill a whole float64 (8 B) on the last axis",
     "bitcast-bytes"),
    ("movement-void", lambda: _store().reshape((1,)), "Reshape: source must be a value, not void (src[0] End)",
     "value-src"),
    # reduce
    ("reduce-op", lambda: X().reduce(Ops.SUB, axes=(0,)),
     "Reduce: reduce op must be Add, Max or Mul, got Ops.SUB", "reduce-op"),
    ("reduce-ranges", lambda: UOp(Ops.REDUCE, (fc(), ic()), ReduceArg(Ops.ADD)),
     "Reduce: reduces over ranges, but source 1 is a Const (src[1] Const)", "reduce-ranges"),
    ("reduce-both", lambda: fc().reduce(Ops.ADD, UOp.range(4, 0), axes=(0,)),
     "Reduce: reduces over ranges and axes (0,) at once; use one or the other", "reduce-ranges"),
    ("reduce-axes", lambda: X().reduce(Ops.ADD, axes=(1, -1)), "Reduce: axes (1, -1) repeat an axis",
     "reduce-axes"),
    ("reduce-axes-range", lambda: X().reduce(Ops.ADD, axes=(2,)), "Reduce: axes (2,) out of range for (3, 4)",
     "axes-range"),
    # call
    ("function-body", lambda: UOp(Ops.FUNCTION, (P0() + 1.0, F())),
     "Function: source 0 must be a Tuple, got Add (src[0] Add)", "src-op"),
    ("function-slots", lambda: UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (P0() + UOp.param(0, (1,)),)), F())),
     "Function: two different Params share slot 0: float32(1,) and float32(12,) (src[0] Tuple)", "param-slots"),
    ("function-nargs", lambda: UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (UOp.param(1, (12,)),)), F())),
     "Function: Param slot 1 has no argument (1 given) (src[0] Tuple)", "param-slots"),
    ("function-argtype", lambda: UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (P0(),)), I())),
     "Function: argument 0 is int32(12,), but Param 0 is float32(12,) (src[1] Buffer)", "param-args"),
    ("function-unread", lambda: UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (P0(),)), F(), G())),
     "Function: argument 1 is read by no Param of the body (a Function's arguments are exactly its Params) "
     "(src[2] Buffer)", "param-args"),
    ("gettuple-range", lambda: UOp(Ops.GETTUPLE, (_fn(),), 3), "GetTuple: index 3 out of range for a Tuple of 1",
     "gettuple"),
    # elementwise
    ("broadcast", lambda: F() + X(), "Add: cannot broadcast (12,) with (3, 4) (axis -1)", "broadcast"),
    ("cmp-dtype", lambda: UOp(Ops.CMPLT, (F(), I())),
     "CmpLt: operands must have the same dtype: float32 vs int32 (src[1] Buffer)", "same-dtype"),
    ("idiv-float", lambda: F() // 2.0, "Idiv: operands must be integers, got float32 (src[0] Buffer)",
     "operand-dtype"),
    ("and-float", lambda: F() & G(), "And: operands must be integers or bool, got float32 (src[0] Buffer)",
     "operand-dtype"),
    ("recip-int", lambda: I().recip(), "Recip: operands must be floats, got int32 (src[0] Buffer)", "operand-dtype"),
    ("where-cond", lambda: UOp(Ops.WHERE, (F(), F(), G())),
     "Where: condition must be bool, got float32 (src[0] Buffer)", "bool-src"),
    ("where-arms", lambda: UOp(Ops.WHERE, (F() < G(), F(), I())),
     "Where: operands must have the same dtype: float32 vs int32 (src[2] Buffer)", "same-dtype"),
    ("cast-void", lambda: UOp(Ops.CAST, (F(),), dtypes.void), "Cast: target must be a non-void DType, got "
     "void", "cast-dtype"),
    ("device-mismatch", lambda: F() + F().copy_to("GPU"),
     "Add: sources on different devices: 'CPU' vs 'GPU'; Copy one first (src[1] Copy)", "device-mismatch"),
    # load / store / ordering
    ("load-gate", lambda: F().load(G(), fc()), "Load: gate must be bool, got float32 (src[2] Const)", "load-gate"),
    ("load-alt", lambda: F().load(I(), bc()), "Load: alt has dtype int32, buf float32 (src[1] Buffer)", "load-alt"),
    ("load-lone-gate", lambda: F().load(I()), "Load: gate must be bool, got int32 (src[1] Buffer)", "load-gate"),
    ("store-gate", lambda: F().store(G(), fc()), "Store: gate must be bool, got float32 (src[2] Const)", "bool-src"),
    ("store-shape", lambda: F().store(X()), "Store: buf.shape (12,) != val.shape (3, 4) (src[1] Reshape)",
     "store-shape"),
    ("store-target", lambda: (F() + G()).store(G()),
     "Store: cannot store into Add; the target must be a Buffer, Param or Load (seen through Index/After/movement "
     "views) (src[0] Add)", "store-target"),
    ("store-dtype", lambda: F().store(I()),
     "Store: operands must have the same dtype: float32 vs int32 (src[1] Buffer)", "same-dtype"),
    ("range-bound", lambda: UOp(Ops.RANGE, (ic(4),), RangeArg(0)),
     "Range: must be an index scalar, got int32 of shape () (src[0] Const)", "index-src"),
    ("range-negative", lambda: UOp.range(-1, 0), "Range: bound -1 is negative (src[0] Const)", "range-bound"),
    ("end-range", lambda: UOp(Ops.END, (F().store(G()), UOp.const(idx, 4))),
     "End: source 1 must be a Range, got Const (src[1] Const)", "src-op"),
    ("linear-order", lambda: UOp(Ops.LINEAR, (UOp.range(4, 0),)),
     "Linear: instruction 0 (Range) reads a Const that no instruction before it computes (src[0] Range)",
     "linear-order"),
    ("group-value", lambda: UOp(Ops.GROUP, (_store(), F())),
     "Group: merges side effects only, but source 1 is a float32 value (src[1] Buffer)", "group-void"),
    ("after-void", lambda: UOp(Ops.AFTER, (_store(), F())), "After: source must be a value, not void (src[0] End)",
     "value-src"),
    # codegen
    ("if-gate", lambda: UOp(Ops.IF, (ic(),)), "If: gate must be bool, got int32 (src[0] Const)", "bool-src"),
    ("endif-src", lambda: UOp(Ops.ENDIF, (bc(),)), "Endif: source 0 must be an If, got Const (src[0] Const)",
     "src-op"),
    ("special-bound", lambda: UOp(Ops.SPECIAL, (fc(),), "gidx0"),
     "Special: must be an index scalar, got float32 of shape () (src[0] Const)", "index-src"),
    ("atomic-idx", lambda: UOp(Ops.ATOMIC_ADD, (F(), G())),
     "AtomicAdd: source 0 must be an Index, got Buffer (src[0] Buffer)", "src-op"),
    ("ins-arg", lambda: UOp(Ops.INS, (fc(),), ("vaddss", "f32")),
     "Ins: arg must be a non-tuple or a (name, dtype, ...) tuple, got ('vaddss', 'f32')", "arg-type"),
    ("load-arg", lambda: UOp(Ops.LOAD, (F(),), LoadArg(addrspace="LOCAL")),  # type: ignore[arg-type]
     "Load: addrspace must be an AddrSpace or None, got 'LOCAL'", "addrspace"),
]


def test_error_cases_are_distinct() -> None:
    assert len(ERRORS) >= 25
    assert len({name for name, *_ in ERRORS}) == len({msg for _, _, msg, _ in ERRORS}) == len(ERRORS)


@pytest.mark.parametrize(("build", "msg", "rule"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_spec_error(build: Callable[[], UOp], msg: str, rule: str) -> None:
    _err(build, msg, rule)


def test_error_names_the_offending_source() -> None:
    with pytest.raises(SpecError) as e:
        validate(UOp(Ops.WHERE, (F(), F(), G())))
    assert e.value.node.op is Ops.WHERE and e.value.src == 0 and e.value.rule == "bool-src"


def test_validate_reports_the_deepest_bad_node() -> None:
    bad = X().reshape((5, 3))
    with pytest.raises(SpecError) as e:
        validate(UOp.sink(F().store(G()), UOp(Ops.CONTIGUOUS, (bad,))))
    assert e.value.node is bad


def test_check_validates_one_node() -> None:
    check(F() + G())
    with pytest.raises(SpecError, match=re.escape("Add: takes 2 sources, got 3")):
        check(UOp(Ops.ADD, (F(), G(), F())))


def test_scalar_shapes() -> None:
    s = X().reduce(Ops.ADD, axes=(0, 1)).reshape(())
    assert validate(UOp.sink(UOp.param(0, ()).store(s))).src[0].src[1].shape == ()


def test_props_crash_becomes_spec_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(u: UOp) -> None:
        raise KeyError("no axis")
    monkeypatch.setattr(UOp.__dict__["axis"], "rule", boom)  # the property keeps the rule props.DERIVE gave it
    with pytest.raises(SpecError, match=re.escape("Detach: cannot derive axis: KeyError: 'no axis'")) as e:
        check(UOp(Ops.DETACH, (UOp.buffer(7),)))
    assert e.value.rule == "derive" and isinstance(e.value.__cause__, KeyError)


def test_validate_is_iterative() -> None:
    x = F()
    for _ in range(5000):
        x = x + fc()
    assert validate(x) is x


# ---------------------------------------------------------------- (c) realistic graphs
def test_elementwise_kernel() -> None:
    """c[i] = a[i] + b[i] after rangeify: scalar Index/Load/Add/Store inside one closed Range."""
    a, bb, c = (UOp.buffer(16, f32).replace(tag=t) for t in "abc")
    r = UOp.range(16, 0, AxisType.GLOBAL)
    out = c.index(r).store(a.index(r).load() + bb.index(r).load())
    k = UOp.sink(out.end(r))
    assert validate(k) is k and k.dtype == dtypes.void


def test_gemm_kernel_with_reduce_range() -> None:
    """C[m, n] = sum_k A[m, k] * B[k, n] with Ranges for m, n and a REDUCE range for k; Index of 2D views."""
    M, N, K = 4, 5, 6
    A, B, C = UOp.buffer(M * K).reshape((M, K)), UOp.buffer(K * N).reshape((K, N)), UOp.buffer(M * N)
    m, n = UOp.range(M, 0, AxisType.GLOBAL), UOp.range(N, 1, AxisType.LOCAL)
    k = UOp.range(K, 2, AxisType.REDUCE)
    acc = (A.index(m, k).load() * B.index(k, n).load()).reduce(Ops.ADD, k)
    st = C.reshape((M, N)).index(m, n).store(acc, m < 3)
    assert validate(UOp.sink(st.end(m, n))).src[0].op is Ops.END


def test_tensor_level_gemm() -> None:
    """SPEC's gemm composition before rangeify: broadcast Mul, Reduce over an axis, Store into a view."""
    M, N, K = 3, 4, 5
    A, B = UOp.buffer(M * K).reshape((M, K)), UOp.buffer(K * N).reshape((K, N))
    prodt = A.reshape((M, K, 1)) * B.reshape((1, K, N))
    s = prodt.reduce(Ops.ADD, axes=(1,)).reshape((M, N))
    C = UOp.buffer(M * N)
    sink = UOp.sink(C.reshape((M, N)).store(s))
    assert validate(sink) is sink and s.shape == (M, N)


def test_function_with_symbolic_param() -> None:
    """@function-style capture: a Param of symbolic size n, called with a (12,) buffer; GetTuple gets (12,)."""
    n = UOp.variable("n", 1, 16)
    p = UOp.param(0, (n,))
    fn = UOp(Ops.FUNCTION, (UOp(Ops.TUPLE, (p * 2.0, p + p)), F()))
    out = UOp(Ops.GETTUPLE, (fn,), 1)
    assert validate(out).shape == (12,)


def test_multi_device_broadcast() -> None:
    """SPEC collective: T.reshape(1, s).expand(n, s).copy(D).replicated(0)."""
    D = ("GPU:0", "GPU:1")
    t = UOp.buffer(8, f32, "GPU:0").reshape((1, 8)).expand((2, 8)).copy_to(D).replicated((0,))
    assert validate(t).axis is None and t.device == D


def test_gated_codegen_kernel() -> None:
    """After lowering: Special indices, If/Endif, a gated Store and a Linear/Program wrapper."""
    g = UOp.special(16, "gidx0")
    cond = g < 12
    st = F().index(g).store(G().index(g).load(UOp.const(f32, 0.0), cond) * 2.0, cond)
    iff = UOp(Ops.IF, (cond,))
    body = [u for u in st.toposort() if u not in cond.sparents()]  # every instruction, constants included
    lin = UOp(Ops.LINEAR, (*cond.toposort(), iff, *body, UOp(Ops.ENDIF, (iff,))))
    prog = UOp(Ops.PROGRAM, (lin, UOp(Ops.SOURCE, (), "...")), "E_16")
    assert validate(prog) is prog
