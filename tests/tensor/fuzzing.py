"""Differential fuzzing of the Tensor front-end against PyTorch (issue 27): random programs, run on a uopviz device
and, independently, in torch (float64 for float programs, the program's own int dtype for int programs), compared
value by value, with their dtypes and shapes, and for float programs their gradients too.

A program is JSON data, never code, so that a failure prints, shrinks and pastes as a test:

    {"seed": 7, "dtype": "float32",
     "inputs": {"a": {"shape": [4, 8], "fill": "normal", "seed": 11}, ...},
     "ops": [{"op": "matmul", "args": ["a", "b"], "out": ["t0"], "p": {}}, ...],
     "outputs": ["t0", ...]}

Every op has two implementations in OPS, one per library; the program is interpreted once with each. The gradient
check differentiates one scalar loss, Σ sum(output · w) over the float outputs with seeded random weights w. The
module lives beside the tests (pytest puts this folder on sys.path) and bench/fuzz.py runs it long; uopviz itself
never imports torch.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import pprint
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import uopviz
from uopviz import Tensor

Program = dict[str, Any]
Op = dict[str, Any]

FLOATS = ("float32", "float16", "bfloat16", "float64")
INTS = ("int32", "int64")
TOL = {"float64": 1e-9, "float32": 1e-4, "float16": 2e-2, "bfloat16": 8e-2}
FUNCTION_STREAM = 1  # the generator's random stream that picks the programs run as a @function
GRAD_DTYPES = ("float32", "float64")  # halves: the f64 reference's gradients are too far from theirs to judge


# ---------------------------------------------------------------- the ops, once per library
@dataclass(frozen=True)
class OpDef:
    """One op: its uopviz and torch forms (each takes the argument values and the params, gives the outputs) and
    the uopviz dtype of its outputs given its arguments' ("same": the first argument's)."""

    uv: Callable[..., Any]
    th: Callable[..., Any]
    dtype: str = "same"


def _same(f: Callable[..., Any]) -> OpDef:
    """An op both libraries spell alike (operators and methods of one name)."""
    return OpDef(f, f)


def _pad_th(a: torch.Tensor, pads: list[list[int]], value: float) -> torch.Tensor:
    return F.pad(a, [w for pair in reversed(pads) for w in pair], value=value)


def _index(slices: list[list[int | None]]) -> tuple[slice, ...]:
    return tuple(slice(*s) for s in slices)


def _round_once(x: torch.Tensor, t: torch.dtype) -> torch.Tensor:
    """float64 x rounded to half dtype t once, as NumPy's and C's conversions do (torch goes through float32 and
    rounds twice: 1 ulp off next to a tie): the float32 step rounds to odd, so the last rounding is the only one."""
    f = x.float()
    bits = f.view(torch.int32)
    inexact = (f.double() != x) & ~x.isnan()
    bits = torch.where(inexact & (f.double().abs() > x.abs()), bits - 1, bits)
    return torch.where(inexact, bits | 1, bits).view(torch.float32).to(t).to(x.dtype)


class _RoundTrip(torch.autograd.Function):
    """float64 -> half -> float64 rounding once both ways (the cast's gradient is the gradient cast back)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, t: torch.dtype) -> torch.Tensor:
        ctx.t = t
        return _round_once(a, t)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _round_once(g, ctx.t), None


def _cast_th(a: torch.Tensor, to: str) -> torch.Tensor:
    """The round trip through `to`; from float64 to a half rounded once (_round_once)."""
    t = getattr(torch, to)
    if a.dtype == torch.float64 and t in (torch.float16, torch.bfloat16):
        return _RoundTrip.apply(a, t)
    return a.to(t).to(a.dtype)


def _layernorm_th(a: torch.Tensor) -> torch.Tensor:
    """A row of (nearly) one value makes layernorm amplify rounding by 1/√eps: the reference refuses such a row,
    which makes the program invalid, rather than judge the device's rounding noise."""
    if a.numel() and float(a.detach().var(-1, correction=0).min()) < 1e-3:
        raise ValueError("layernorm of a (nearly) constant row is ill-conditioned")
    return F.layer_norm(a, a.shape[-1:])


def _sum_th(a: torch.Tensor, axes: list[int], keepdim: bool) -> torch.Tensor:
    return a.sum(tuple(axes), keepdim=keepdim).to(a.dtype)  # both widen int sums to int64: back to the program's


OPS: dict[str, OpDef] = {
    # elementwise
    "add": _same(lambda a, b: a + b), "sub": _same(lambda a, b: a - b), "mul": _same(lambda a, b: a * b),
    "maximum": _same(lambda a, b: a.maximum(b)), "minimum": _same(lambda a, b: a.minimum(b)),
    "add_c": _same(lambda a, c: a + c), "mul_c": _same(lambda a, c: a * c),
    "neg": _same(lambda a: -a), "relu": _same(lambda a: a.relu()), "tanh": _same(lambda a: a.tanh()),
    "sigmoid": _same(lambda a: a.sigmoid()), "exp": _same(lambda a: a.exp()), "abs": _same(lambda a: a.abs()),
    "square": _same(lambda a: a * a), "sin": _same(lambda a: a.sin()),
    "cast": OpDef(lambda a, to: a.cast(to).cast(a.dtype), _cast_th),
    "gt": OpDef(lambda a, b: a > b, lambda a, b: a > b, "bool"),
    "eq": OpDef(lambda a, b: a == b, lambda a, b: a == b, "bool"),
    "where": OpDef(lambda c, a, b: c.where(a, b), torch.where, "arg1"),
    "where_c": OpDef(lambda c, a, v: c.where(a, v), lambda c, a, v: torch.where(c, a, torch.tensor(v, dtype=a.dtype)),
                     "arg1"),
    # integer-only
    "floordiv_c": _same(lambda a, c: a // c), "mod_c": _same(lambda a, c: a % c),
    "floordiv": _same(lambda a, b: a // b), "mod": _same(lambda a, b: a % b),
    "and": _same(lambda a, b: a & b), "or": _same(lambda a, b: a | b), "xor": _same(lambda a, b: a ^ b),
    "invert": _same(lambda a: ~a), "shl_c": _same(lambda a, c: a << c), "shr_c": _same(lambda a, c: a >> c),
    # reductions
    "sum": OpDef(lambda a, axes, keepdim: a.sum(tuple(axes), keepdim=keepdim).cast(a.dtype), _sum_th),
    "mean": OpDef(lambda a, axes, keepdim: a.mean(tuple(axes), keepdim=keepdim),
                  lambda a, axes, keepdim: a.mean(tuple(axes), keepdim=keepdim)),
    "max": OpDef(lambda a, axes, keepdim: a.max(tuple(axes), keepdim=keepdim),
                 lambda a, axes, keepdim: a.amax(tuple(axes), keepdim=keepdim)),
    "min": OpDef(lambda a, axes, keepdim: a.min(tuple(axes), keepdim=keepdim),
                 lambda a, axes, keepdim: a.amin(tuple(axes), keepdim=keepdim)),
    "var": OpDef(lambda a, axes, keepdim, correction: a.var(tuple(axes), keepdim=keepdim, correction=correction),
                 lambda a, axes, keepdim, correction: a.var(tuple(axes), keepdim=keepdim, correction=correction)),
    "softmax": _same(lambda a, axis: a.softmax(axis)), "log_softmax": _same(lambda a, axis: a.log_softmax(axis)),
    "logsumexp": _same(lambda a, axis, keepdim: a.logsumexp(axis, keepdim=keepdim)),
    "layernorm": OpDef(lambda a: a.layernorm(-1), _layernorm_th),
    "matmul": _same(lambda a, b: a @ b),
    # movement
    "flatten": _same(lambda a, start, end: a.flatten(start, end)),
    "unflatten": _same(lambda a, dim, sizes: a.unflatten(dim, tuple(sizes))),
    "unsqueeze": _same(lambda a, dim: a.unsqueeze(dim)), "squeeze": _same(lambda a, dim: a.squeeze(dim)),
    "permute": _same(lambda a, order: a.permute(tuple(order))),
    "expand": _same(lambda a, shape: a.expand(tuple(shape))),
    "pad": OpDef(lambda a, pads, value: a.pad([tuple(p) for p in pads], value=value), _pad_th),
    "slice": _same(lambda a, slices: a[_index(slices)]),
    "flip": _same(lambda a, axes: a.flip(tuple(axes))),
    "cat": OpDef(lambda *xs, dim: xs[0].cat(*xs[1:], dim=dim), lambda *xs, dim: torch.cat(xs, dim)),
    "chunk": _same(lambda a, chunks, dim: a.chunk(chunks, dim)),
    "split": _same(lambda a, size, dim: a.split(size, dim)),
    "reshape": _same(lambda a, shape: a.reshape(tuple(shape))),
    # what real models are made of
    "gelu": OpDef(lambda a, approximate: a.gelu(approximate),
                  lambda a, approximate: F.gelu(a, approximate=approximate)),
    "log1sq": _same(lambda a: (a * a + 1).log()), "sqrt_sq": _same(lambda a: (a * a + 0.25).sqrt()),
    "div_sq": _same(lambda a, b: a / (b * b + 0.5)),
    "cumsum": OpDef(lambda a, axis: a.cumsum(axis).cast(a.dtype), lambda a, axis: a.cumsum(axis).to(a.dtype)),
    "triu": _same(lambda a, k: a.triu(k)), "tril": _same(lambda a, k: a.tril(k)),
    "take": OpDef(lambda a, index, axis: a[(slice(None),) * axis + (Tensor(np.array(index, np.int64),
                                                                            device=a.device),)],
                  lambda a, index, axis: a[(slice(None),) * axis + (torch.tensor(index),)]),
    "conv2d": OpDef(lambda x, w, stride, padding, groups: x.conv2d(w, stride=stride, padding=padding, groups=groups),
                    lambda x, w, stride, padding, groups: F.conv2d(x, w, stride=stride, padding=padding,
                                                                   groups=groups)),
    "max_pool2d": OpDef(lambda a, k, stride, padding: a.max_pool2d(k, stride, padding),
                        lambda a, k, stride, padding: F.max_pool2d(a, k, stride, padding)),
    "avg_pool2d": OpDef(lambda a, k, stride, padding: a.avg_pool2d(k, stride, padding),
                        lambda a, k, stride, padding: F.avg_pool2d(a, k, stride, padding)),
    "cross_entropy": OpDef(lambda a, target, smoothing: a.cross_entropy(
                               Tensor(np.array(target, np.int64), device=a.device), label_smoothing=smoothing),
                           lambda a, target, smoothing: F.cross_entropy(a, torch.tensor(target),
                                                                        label_smoothing=smoothing)),
}


def _apply(impl: Callable[..., Any], xs: list[Any], p: dict[str, Any]) -> list[Any]:
    out = impl(*xs, **p)
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---------------------------------------------------------------- input values
def input_values(prog: Program) -> dict[str, np.ndarray]:
    """Each input's values (float64 already rounded to the program's dtype, or ints), from its seed and fill."""
    dt = prog["dtype"]
    return {name: _fill(spec, dt) for name, spec in prog["inputs"].items()}


def _fill(spec: dict[str, Any], dt: str) -> np.ndarray:
    rng = np.random.default_rng(spec["seed"])
    shape, fill = tuple(spec["shape"]), spec["fill"]
    n = int(np.prod(shape))
    if fill == "ones":
        return np.ones(shape, dt if dt in INTS else np.float64)
    if dt in INTS:
        info = np.iinfo(dt)
        edges = np.array([info.min, info.min + 1, -2, 0, 1, 2, info.max - 1, info.max], dtype=dt)
        if fill == "normal":
            v = rng.integers(-100, 100, n)
        elif fill == "ties":
            v = rng.integers(-1, 2, n)
        elif fill == "extreme":  # the dtype's edges among values from its whole range
            v = np.where(rng.random(n) < 0.6, rng.choice(edges, n), rng.integers(info.min, info.max, n, dtype=dt))
        else:  # "divisor": never 0 or -1, which C cannot divide by (torch raises or traps)
            v = rng.choice(np.array([1, 2, 3, -2, -3, 7, -7, info.max, info.min], dtype=dt), n)
        return np.asarray(v, dtype=dt).reshape(shape)
    # floats; no zeros among the ties: there relu's and abs's subgradients are conventions, which may differ
    v = rng.choice([-1.0, 0.5, 1.0, 2.0], n) if fill == "ties" else rng.standard_normal(n)
    return torch.tensor(v.reshape(shape)).to(getattr(torch, dt)).to(torch.float64).numpy()


def _loss_weights(prog: Program, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    rng = np.random.default_rng(prog["seed"] + 1)
    dt = getattr(torch, prog["dtype"])
    return [torch.tensor(rng.standard_normal(s)).to(dt).to(torch.float64).numpy() for s in shapes]


# ---------------------------------------------------------------- the two interpreters
@dataclass
class Outcome:
    """What one library computed: outputs (values, uopviz dtype names), the loss and the inputs' gradients."""

    values: list[np.ndarray] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    loss: float | None = None
    grads: dict[str, np.ndarray] = field(default_factory=dict)


def _out_dtype(op: Op, arg_dtypes: list[str]) -> str:
    rule = OPS[op["op"]].dtype
    return arg_dtypes[0] if rule == "same" else arg_dtypes[1] if rule == "arg1" else rule


SUMMED = frozenset({"sum", "mean", "var", "softmax", "log_softmax", "logsumexp", "layernorm", "matmul"})
"""Ops whose float result depends on the order of their adds, which differs between libraries and kernels."""


def _jittered(v: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """v with each element moved by up to one unit of its dtype's precision (a rounding another order of adds
    could have made): what the gauge's second run feeds on."""
    if not v.dtype.is_floating_point:
        return v
    u = torch.from_numpy(rng.uniform(-1, 1, tuple(v.shape))).to(v.dtype)
    return v * (1 + u * torch.finfo(v.dtype).eps)


def _interpret(prog: Program, env: dict[str, Any], dtypes: dict[str, str], lib: str,
               jitter: np.random.Generator | None = None) -> None:
    for op in prog["ops"]:
        impl = getattr(OPS[op["op"]], lib)
        outs = _apply(impl, [env[a] for a in op["args"]], op["p"])
        if jitter is not None and op["op"] in SUMMED:
            outs = [_jittered(v, jitter) for v in outs]
        if len(outs) != len(op["out"]):
            raise ValueError(f"{op['op']} gave {len(outs)} values, the program names {len(op['out'])}")
        dt = _out_dtype(op, [dtypes[a] for a in op["args"]])
        for name, v in zip(op["out"], outs):
            env[name], dtypes[name] = v, dt


def wants_grad(prog: Program) -> bool:
    return prog["dtype"] in GRAD_DTYPES


def run_torch(prog: Program, grad: bool, native: bool = False, jitter: bool = False) -> Outcome:
    """The reference, in float64 (or the int dtype); native: in the program's own float dtype, torch's rounding
    noise, which says how ill-conditioned the program is; jitter (with native): each summed result moved by up to
    an ulp, as another order of adds rounds it, for programs where torch's own rounding happens to agree with float64
    (softmax over scores of 1e8 in float32). Raises where the program is not a valid one (torch rejects it, or makes
    an empty tensor)."""
    grad = grad and wants_grad(prog)
    vals = input_values(prog)
    dt = getattr(torch, prog["dtype"]) if native else None
    env: dict[str, Any] = {k: torch.tensor(v).to(dt).requires_grad_(grad and prog["dtype"] not in INTS)
                           for k, v in vals.items()}
    dtypes = dict.fromkeys(vals, prog["dtype"])
    with torch.set_grad_enabled(grad):
        _interpret(prog, env, dtypes, "th", np.random.default_rng(prog["seed"]) if jitter else None)
    outs = [env[o] for o in prog["outputs"]]
    if any(o.numel() == 0 for o in outs):
        raise ValueError("an output is empty")
    res = Outcome([_f64(o) for o in outs], [dtypes[o] for o in prog["outputs"]])
    if grad:
        floats = [o for o, d in zip(outs, res.dtypes) if d in FLOATS]
        if floats:
            ws = _loss_weights(prog, [tuple(o.shape) for o in floats])
            loss = sum((o * torch.tensor(w).to(o.dtype)).sum() for o, w in zip(floats, ws))
            res.loss = float(loss.detach())
            gs = torch.autograd.grad(loss, [env[k] for k in vals], allow_unused=True)
            res.grads = {k: np.zeros(v.shape) if g is None else _f64(g) for (k, v), g in zip(vals.items(), gs)}
    return res


def _f64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy() if t.dtype.is_floating_point else t.detach().numpy()


def run_uopviz(prog: Program, device: str, grad: bool) -> Outcome:
    """The program on a uopviz device (exceptions propagate: the caller reports them)."""
    grad = grad and wants_grad(prog)
    dt = prog["dtype"]
    env: dict[str, Any] = {}
    for k, v in input_values(prog).items():
        if dt in INTS or dt in GRAD_DTYPES:
            env[k] = Tensor(v.astype(dt), device=device, requires_grad=grad)
        else:  # NumPy has no bfloat16: the rounded values are exact in float32
            env[k] = Tensor(v.astype(np.float32), device=device).cast(dt)
    inputs = dict(env)
    dtypes = dict.fromkeys(env, dt)
    if prog.get("function") and len(inputs) > 1:
        outs = _through_function(prog, inputs, dtypes)
    else:
        _interpret(prog, env, dtypes, "uv")
        outs = [env[o] for o in prog["outputs"]]
    loss, grads = None, []
    floats = [o for o in outs if o.dtype.is_float]
    if grad and floats:  # built before anything is realized: a realized tensor's graph no longer reaches the inputs
        ws = _loss_weights(prog, [tuple(o.shape) for o in floats])
        # each weight in its output's dtype, as run_torch does: a float32 output of a float64 program is weighed in
        # float32 (weights are exact in float32 unless the program is float64)
        terms = [o.mul(Tensor(w if o.dtype.itemsize == 8 else w.astype(np.float32), device=device).cast(o.dtype)).sum()
                 for o, w in zip(floats, ws)]
        loss = sum(terms[1:], start=terms[0])
        grads = loss.gradient(*inputs.values())
    extra = [loss, *grads] if loss is not None else []
    outs[0].realize(*outs[1:], *extra)
    res = Outcome([o.numpy() for o in outs], [o.dtype.name for o in outs])
    if loss is not None:
        res.loss = float(loss.numpy())
        res.grads = {k: g.numpy() for k, g in zip(inputs, grads)}
    return res


def _through_function(prog: Program, inputs: dict[str, Tensor], dtypes: dict[str, str]) -> list[Tensor]:
    """prog's outputs computed by a @function of all its inputs but the last, which the function closes over (a
    realized buffer its body reads: an implicit argument, rebuilt as a Param, with its gradient all the same)."""
    *passed, closed = inputs
    held = inputs[closed].realize()

    def body(*ts: Tensor) -> tuple[Tensor, ...]:
        env: dict[str, Any] = {**dict(zip(passed, ts)), closed: held}
        _interpret(prog, env, dict(dtypes), "uv")
        return tuple(env[o] for o in prog["outputs"])
    return list(uopviz.function(body)(*(inputs[k] for k in passed)))


# ---------------------------------------------------------------- comparison
def _differs(got: np.ndarray, want: np.ndarray, dt: str, noise: Any = 0.0) -> str | None:
    """Why got is not want: shape, exact ints and bools, floats to the dtype's tolerance relative to the tensor's
    largest reference value or 1, plus 8 times torch's own error in the dtype (noise: an ill-conditioned program
    loses digits in any library). NaN equals NaN; values past half the dtype's range, or that torch overflows in the
    dtype (noise +inf), are not judged."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if dt not in FLOATS:
        bad = got != want
    else:
        g, w = got.astype(np.float64), want.astype(np.float64)
        judged = ~(np.abs(w) > float(torch.finfo(getattr(torch, dt)).max) / 2) & ~np.isposinf(noise)
        fin = np.isfinite(w)
        scale = float(np.abs(w[fin & judged]).max(initial=1.0))
        tol = TOL[dt]
        with np.errstate(invalid="ignore"):
            close = np.abs(g - w) <= tol * (np.abs(w) + scale) + 8 * np.nan_to_num(noise, posinf=0.0)
        same = (np.isnan(g) & np.isnan(w)) | (g == w)
        bad = judged & ~np.where(fin, close, same)
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{int(bad.sum())} of {bad.size} differ, first at {at}: got {got[at]!r}, want {want[at]!r}"


def mismatches(prog: Program, device: str, grad: bool = True) -> list[str]:
    """Every way the device disagrees with torch on prog: [] when it agrees. An exception is a mismatch."""
    ref = run_torch(prog, grad)
    gauges = [ref]
    if prog["dtype"] in FLOATS:
        with contextlib.suppress(Exception):  # an op torch lacks in a half dtype: no gauge, the plain tolerance
            gauges = [run_torch(prog, grad, native=True), run_torch(prog, grad, native=True, jitter=True)]
    try:
        got = run_uopviz(prog, device, grad)
    except Exception as e:
        return [f"error: {type(e).__name__}: {str(e)[:300]}"]

    def noise(a: Any, b: Any) -> Any:
        """|torch in the dtype − torch in float64|; +inf where the dtype overflows to inf or NaN a value float64
        holds (torch cannot compute it in the dtype either, so it is not judged)."""
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != "f":
            return 0.0
        with np.errstate(invalid="ignore"):
            return np.where(np.isfinite(b) & ~np.isfinite(a), np.inf, np.abs(a - b))

    def worst(pick: Callable[[Outcome], Any], w: Any) -> Any:
        """The largest noise of the gauges (torch in the dtype, and jittered) for the value pick takes."""
        return functools.reduce(np.maximum, [noise(pick(gauge), w) for gauge in gauges])

    out = []
    for k, (name, g, w, gd, wd) in enumerate(zip(prog["outputs"], got.values, ref.values, got.dtypes, ref.dtypes)):
        if gd != wd:
            out.append(f"output {name}: dtype {gd} != {wd}")
        elif (why := _differs(g, w, wd, worst(lambda o, k=k: o.values[k], w))) is not None:
            out.append(f"output {name}: {why}")
    if ref.loss is not None and got.loss is not None:
        if (why := _differs(np.array(got.loss), np.array(ref.loss), prog["dtype"],
                            worst(lambda o: o.loss, ref.loss))) is not None:
            out.append(f"loss: {why}")
        for k, w in ref.grads.items():
            if (why := _differs(got.grads[k], w, prog["dtype"],
                                worst(lambda o, k=k, w=w: o.grads.get(k, w), w))) is not None:
                out.append(f"grad {k}: {why}")
    return out


def valid(prog: Program, grad: bool = True) -> bool:
    """torch runs prog: the shrinker's and the generator's test of a candidate."""
    try:
        run_torch(prog, grad)
    except Exception:
        return False
    return True


# ---------------------------------------------------------------- the generator
DIMS = (1, 1, 2, 3, 4, 5, 7, 8, 12, 16)


class _Gen:
    """Builds one program op by op; each op is run on torch as it is added (the reference's shapes pick the next
    op's params) and dropped where torch rejects it."""

    def __init__(self, seed: int, max_dim: int, max_numel: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.max_dim, self.max_numel = max_dim, max_numel
        r = self.rng.random()
        dt = ("int32" if self.rng.random() < 0.5 else "int64") if r < 0.2 else \
            str(self.rng.choice(FLOATS, p=[0.6, 0.15, 0.15, 0.1]))
        self.prog: Program = {"seed": seed, "dtype": dt, "inputs": {}, "ops": [], "outputs": []}
        self.env: dict[str, torch.Tensor] = {}
        self.dtypes: dict[str, str] = {}
        self.is_int = dt in INTS

    # ---- helpers
    def dim(self) -> int:
        return int(self.rng.choice([d for d in DIMS if d <= self.max_dim]))

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def input(self, shape: tuple[int, ...], fill: str | None = None) -> str:
        if fill is None:
            fill = str(self.rng.choice(["normal", "ties", "extreme"] if self.is_int else ["normal", "normal", "ties"]))
        name = f"in{len(self.prog['inputs'])}"
        spec = {"shape": list(shape), "fill": fill, "seed": int(self.rng.integers(1 << 30))}
        self.prog["inputs"][name] = spec
        self.env[name] = torch.tensor(_fill(spec, self.prog["dtype"]))
        self.dtypes[name] = self.prog["dtype"]
        return name

    def emit(self, op: str, args: list[str], nout: int = 1, **p: Any) -> list[str] | None:
        """Add op; None (and nothing added) where torch rejects it or a result is empty or too big."""
        outs = [f"t{len(self.prog['ops'])}_{k}" if nout > 1 else f"t{len(self.prog['ops'])}" for k in range(nout)]
        rec = {"op": op, "args": args, "out": outs, "p": p}
        try:
            vals = _apply(OPS[op].th, [self.env[a] for a in args], p)
        except Exception:
            return None
        if len(vals) != nout or any(v.numel() == 0 or v.numel() > self.max_numel for v in vals):
            return None
        self.prog["ops"].append(rec)
        dt = _out_dtype(rec, [self.dtypes[a] for a in args])
        for n, v in zip(outs, vals):
            self.env[n], self.dtypes[n] = v, dt
        return outs

    def emit1(self, op: str, args: list[str], **p: Any) -> str | None:
        out = self.emit(op, args, **p)
        return None if out is None else out[0]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self.env[name].shape)

    def pick(self) -> str:
        """A value in the program's dtype (not a bool), the recent ones likelier."""
        names = [n for n, d in self.dtypes.items() if d != "bool"]
        w = np.arange(1, len(names) + 1, dtype=np.float64) ** 2
        return str(self.rng.choice(names, p=w / w.sum()))

    def axes(self, nd: int) -> list[int]:
        k = int(self.rng.integers(1, nd + 1))
        ax = sorted(int(a) for a in self.rng.choice(nd, k, replace=False))
        return [a - nd if self.chance(0.3) else a for a in ax]

    def partner(self, x: str) -> str:
        """A value to combine with x elementwise: an existing one that broadcasts with it, or a new input whose
        shape broadcasts (axes set to 1, leading axes dropped, or one more leading axis)."""
        s = self.shape(x)
        fits = [n for n, d in self.dtypes.items() if d != "bool" and n != x and _broadcasts(self.shape(n), s)]
        if fits and self.chance(0.4):
            return str(self.rng.choice(fits))
        new = [1 if self.chance(0.3) else d for d in s]
        if new and self.chance(0.3):
            new = new[int(self.rng.integers(len(new) + 1)):]
        elif self.chance(0.15):
            new = [self.dim(), *new]
        return self.input(tuple(new))

    # ---- op families
    def step(self) -> None:
        fam = self.rng.choice(["unary", "binary", "scalar", "reduce", "softmax", "matmul", "move", "cat", "chunk",
                               "where", "cast", "pattern", "model"],
                              p=[0.09, 0.12, 0.05, 0.1, 0.05, 0.07, 0.15, 0.05, 0.05, 0.05, 0.03, 0.1, 0.09])
        x = self.pick()
        s, nd = self.shape(x), self.env[x].ndim
        if fam == "unary":
            ops = ["neg", "abs", "square"] + (["invert"] if self.is_int else
                                              ["relu", "tanh", "sigmoid", "exp", "sin", "layernorm"])
            self.emit(str(self.rng.choice(ops)), [x])
        elif fam == "binary":
            ops = ["add", "sub", "mul", "maximum", "minimum"]
            ops += ["floordiv", "mod", "and", "or", "xor"] if self.is_int else ["mul", "add"]
            op = str(self.rng.choice(ops))
            y = self.input(s, "divisor") if op in ("floordiv", "mod") else self.partner(x)
            self.emit(op, [y, x] if self.chance(0.3) and op not in ("floordiv", "mod") else [x, y])
        elif fam == "scalar":
            self.scalar(x)
        elif fam == "reduce" and nd:
            ops = ["sum", "max", "min"] + ([] if self.is_int else ["mean", "var"])
            op, axes = str(self.rng.choice(ops)), self.axes(nd)
            extra = {"correction": int(self.rng.integers(0, 2))} if op == "var" else {}
            if op == "var" and extra["correction"] and all(s[a] == 1 for a in axes):
                extra["correction"] = 0
            self.emit(op, [x], axes=axes, keepdim=self.chance(0.5), **extra)
        elif fam == "softmax" and nd and not self.is_int:
            axis = int(self.rng.integers(-nd, nd))
            op = str(self.rng.choice(["softmax", "log_softmax", "logsumexp"]))
            self.emit(op, [x], axis=axis, **({"keepdim": self.chance(0.5)} if op == "logsumexp" else {}))
        elif fam == "matmul" and nd and not self.is_int:
            self.matmul(x)
        elif fam == "move":
            self.move(x)
        elif fam == "cat" and nd:
            self.cat(x)
        elif fam == "chunk" and nd:
            axis = int(self.rng.integers(nd))
            if s[axis] >= 2 and self.chance(0.5):
                n = int(self.rng.integers(2, 4))
                self.emit("chunk", [x], nout=len(torch.chunk(self.env[x], n, axis)), chunks=n, dim=axis)
            elif s[axis] >= 2:
                n = int(self.rng.integers(1, s[axis]))
                self.emit("split", [x], nout=-(-s[axis] // n), size=n, dim=axis - nd if self.chance(0.5) else axis)
        elif fam == "where":
            self.where(x)
        elif fam == "cast":
            to = ["int64", "int32"] if self.is_int else ["float16", "bfloat16", "float32"]
            self.emit("cast", [x], to=str(self.rng.choice(to)))
        elif fam == "pattern" and not self.is_int:
            (self.attention if self.chance(0.6) else self.mlp)()
        elif fam == "model":
            self.model_op(x)

    def scalar(self, x: str) -> None:
        if self.is_int:
            info = np.iinfo(self.prog["dtype"])
            op = str(self.rng.choice(["add_c", "mul_c", "floordiv_c", "mod_c", "shl_c", "shr_c"]))
            if op in ("shl_c", "shr_c"):
                c = int(self.rng.integers(0, info.bits))
            elif op in ("floordiv_c", "mod_c"):
                c = int(self.rng.choice([1, 2, 3, -2, -3, 7, -7, info.max]))
            else:
                c = int(self.rng.choice([1, -1, 2, 3, -7, info.max, info.min, info.max // 2 + 1]))
            self.emit(op, [x], c=c)
        else:
            self.emit(str(self.rng.choice(["add_c", "mul_c"])), [x], c=float(self.rng.choice([0.5, -2.0, 3.0, 0.125])))

    def matmul(self, x: str) -> None:
        s = self.shape(x)
        k, n = s[-1], self.dim()
        fits = [m for m, d in self.dtypes.items() if d != "bool" and len(self.shape(m)) >= 2
                and self.shape(m)[-2] == k]
        w = str(self.rng.choice(fits)) if fits and self.chance(0.3) else \
            self.input((k,) if self.chance(0.1) else (k, n), "normal")
        self.emit("matmul", [x, w])

    def move(self, x: str) -> None:
        s, nd = self.shape(x), len(self.shape(x))
        kind = str(self.rng.choice(["flatten", "unflatten", "reshape", "unsqueeze", "squeeze", "permute", "expand",
                                    "pad", "slice", "flip"]))
        if kind == "reshape":
            self.emit(kind, [x], shape=self.factors(math.prod(s)))
        elif kind == "flatten" and nd >= 2:
            a = int(self.rng.integers(nd - 1))
            self.emit(kind, [x], start=a, end=int(self.rng.integers(a + 1, nd)))
        elif kind == "unflatten" and nd:
            axis = int(self.rng.integers(nd))
            divs = [d for d in range(1, s[axis] + 1) if s[axis] % d == 0]
            self.emit(kind, [x], dim=axis, sizes=[int(self.rng.choice(divs)), -1])
        elif kind == "unsqueeze":
            self.emit(kind, [x], dim=int(self.rng.integers(-nd - 1, nd + 1)))
        elif kind == "squeeze" and 1 in s:
            self.emit(kind, [x], dim=s.index(1))
        elif kind == "permute" and nd >= 2:
            self.emit(kind, [x], order=[int(a) for a in self.rng.permutation(nd)])
        elif kind == "expand":
            new = [self.dim() if d == 1 and self.chance(0.7) else d for d in s]
            if self.chance(0.3) or new == list(s):
                new = [self.dim(), *new]
            self.emit(kind, [x], shape=new)
        elif kind == "pad" and nd:
            pads = [[int(self.rng.integers(0, 3)), int(self.rng.integers(0, 3))] if self.chance(0.6) else [0, 0]
                    for _ in s]
            value = int(self.rng.choice([0, 0, 5, -3])) if self.is_int else float(self.rng.choice([0.0, 0.0, 1.5]))
            self.emit(kind, [x], pads=pads, value=value)
        elif kind == "slice" and nd:
            self.emit(kind, [x], slices=[self.slice(d) for d in s])
        elif kind == "flip" and nd:
            self.emit(kind, [x], axes=self.axes(nd))

    def factors(self, n: int) -> list[int]:
        """A random shape of 1 to 3 axes with n elements (size-1 axes among them)."""
        shape = []
        for _ in range(int(self.rng.integers(0, 3))):
            f = int(self.rng.choice([d for d in range(1, n + 1) if n % d == 0]))
            shape.append(f)
            n //= f
        return [*shape, n]

    def slice(self, d: int) -> list[int | None]:
        if self.chance(0.3):
            return [None, None, None]
        start = int(self.rng.integers(-d, d))
        stop = None if self.chance(0.3) else int(self.rng.integers(-d, d + 1))
        return [start, stop, int(self.rng.choice([1, 1, 1, 2, 3]))]

    def cat(self, x: str) -> None:
        s = self.shape(x)
        axis = int(self.rng.integers(len(s)))
        parts = [x]
        for _ in range(int(self.rng.integers(1, 3))):
            fits = [n for n, d in self.dtypes.items() if d != "bool" and len(self.shape(n)) == len(s)
                    and all(a == b for k, (a, b) in enumerate(zip(self.shape(n), s)) if k != axis)]
            if fits and self.chance(0.5):
                parts.append(str(self.rng.choice(fits)))
            else:
                parts.append(self.input(tuple(self.dim() if k == axis else d for k, d in enumerate(s))))
        self.emit("cat", parts, dim=axis - len(s) if self.chance(0.3) else axis)

    def where(self, x: str) -> None:
        """A condition compared from inputs only (a computed float can round to either side of a comparison,
        differently from the float64 reference), then where with a tensor or a scalar."""
        inputs = [n for n in self.prog["inputs"] if _broadcasts(self.shape(n), self.shape(x))]
        a = str(self.rng.choice(inputs)) if inputs and self.chance(0.5) else self.input(self.shape(x))
        c = self.emit1(str(self.rng.choice(["gt", "eq"])), [a, self.input(self.shape(a), "ties")])
        if c is None:
            return
        if self.chance(0.3):
            v = -10000.0 if not self.is_int else int(np.iinfo(self.prog["dtype"]).min)
            self.emit("where_c", [c, x], v=v)
        else:
            self.emit("where", [c, x, self.partner(x)])

    def model_op(self, x: str) -> None:
        """An op real models lean on: an embedding-style take of rows (indices repeated, negative ones), GELU,
        log/sqrt/div of values kept in their domain, a running sum, a causal mask, a convolution, a pooling, a
        cross-entropy against class targets."""
        s, nd = self.shape(x), len(self.shape(x))
        kinds = ["take", "cumsum", "triu"] + ([] if self.is_int else
                                              ["gelu", "log1sq", "sqrt_sq", "div_sq", "conv2d", "pool", "xent"])
        kind = str(self.rng.choice(kinds))
        if kind == "take" and nd:
            axis = int(self.rng.integers(nd))
            shape = (self.dim(),) if self.chance(0.6) else (self.dim(), self.dim())
            index = self.rng.integers(-s[axis], s[axis], shape).tolist()
            self.emit("take", [x], index=index, axis=axis)
        elif kind == "cumsum" and nd:
            self.emit("cumsum", [x], axis=int(self.rng.integers(-nd, nd)))
        elif kind == "triu" and nd >= 2:
            self.emit(str(self.rng.choice(["triu", "tril"])), [x], k=int(self.rng.integers(-1, 2)))
        elif kind == "gelu":
            self.emit("gelu", [x], approximate=str(self.rng.choice(["none", "tanh"])))
        elif kind in ("log1sq", "sqrt_sq"):
            self.emit(kind, [x])
        elif kind == "div_sq":
            self.emit("div_sq", [x, self.partner(x)])
        elif kind == "conv2d":
            self.conv()
        elif kind == "pool":
            # a new input: values computed from others tie (relu's zeros), where max's subgradient is a convention
            a = self.input((self.dim(), self.dim(), self.dim() + 2, self.dim() + 2), "normal")
            k = int(self.rng.choice([2, 3]))
            self.emit(str(self.rng.choice(["max_pool2d", "avg_pool2d"])), [a], k=k,
                      stride=int(self.rng.choice([1, 2, k])), padding=int(self.rng.integers(0, k // 2 + 1)))
        elif kind == "xent":
            logits = x if nd == 2 and self.chance(0.7) else self.input((self.dim(), self.dim() + 1), "normal")
            n, c = self.shape(logits)
            target = self.rng.integers(0, c, n).tolist()
            self.emit("cross_entropy", [logits], target=target, smoothing=float(self.rng.choice([0.0, 0.0, 0.1])))

    def conv(self) -> None:
        """(N, Cin, H, W) * (Cout, Cin/groups, kH, kW), strided, padded, grouped, maybe on a previous value."""
        fits = [n for n, d in self.dtypes.items() if d != "bool" and len(self.shape(n)) == 4]
        x = str(self.rng.choice(fits)) if fits and self.chance(0.4) else \
            self.input((int(self.rng.choice([1, 2, 3])), self.dim(), self.dim() + 2, self.dim() + 2), "normal")
        cin = self.shape(x)[1]
        groups = int(self.rng.choice([g for g in (1, 2, 3) if cin % g == 0]))
        cout = groups * int(self.rng.choice([1, 2, 3]))
        k = (int(self.rng.choice([1, 2, 3])), int(self.rng.choice([1, 3])))
        w = self.input((cout, cin // groups, *k), "normal")
        self.emit("conv2d", [x, w], stride=int(self.rng.choice([1, 1, 2])), padding=int(self.rng.integers(0, 2)),
                  groups=groups)

    def attention(self) -> None:
        """softmax(q·kᵀ [·scale] [masked])·v [·Wp] [·w], q, k, v from one fused projection split in three or from
        three; the input [times a broadcast gain] [layer-normed]."""
        x = self.pick()
        if self.env[x].ndim not in (2, 3) or self.chance(0.3):
            x = self.input((self.dim(), self.dim()) if self.chance(0.8) else (2, self.dim(), self.dim()), "normal")
        c, d = self.shape(x)[-1], self.dim()
        h: str | None = x
        if self.chance(0.6):
            h = self.emit1("mul", [x, self.input((c,), "normal")])
        if h is not None and self.chance(0.3):
            h = self.emit1("layernorm", [h])
        if h is None:
            return
        if self.chance(0.6):
            qkv = self.emit1("matmul", [h, self.input((c, 3 * d), "normal")])
            split = {"size": d} if self.chance(0.5) else {"chunks": 3}
            parts = None if qkv is None else self.emit("split" if "size" in split else "chunk", [qkv], nout=3,
                                                       dim=-1, **split)
            if parts is None:
                return
            q, k, v = parts
        else:
            q, k, v = (self.emit1("matmul", [h, self.input((c, d), "normal")]) for _ in range(3))
        nd = self.env[h].ndim
        kt = None if k is None else self.emit1("permute", [k], order=[*range(nd - 2), nd - 1, nd - 2])
        sc = None if q is None or kt is None else self.emit1("matmul", [q, kt])
        if sc is not None and self.chance(0.5):
            sc = self.emit1("mul_c", [sc], c=1 / math.sqrt(d))
        if sc is not None and self.chance(0.25):
            t = self.shape(sc)[-1]
            m = self.emit1("gt", [self.input((t, t), "normal"), self.input((t, t), "normal")])
            sc = None if m is None else self.emit1("where_c", [m, sc], v=-10000.0)
        o = None if sc is None else self.emit1("softmax", [sc], axis=-1)
        o = None if o is None or v is None else self.emit1("matmul", [o, v])
        if o is not None and self.chance(0.6):
            o = self.emit1("matmul", [o, self.input((d, self.dim()), "normal")])
        if o is not None and self.chance(0.5):
            self.emit1("mul", [o, self.input(self.shape(o), "normal")])

    def mlp(self) -> None:
        """x → layernorm [· gain + bias] → ·W1 → relu/tanh → ·W2 [+ x]."""
        x = self.pick()
        if self.env[x].ndim == 0:
            return
        c = self.shape(x)[-1]
        h = self.emit1("layernorm", [x])
        if h is not None and self.chance(0.5):
            h = self.emit1("mul", [h, self.input((c,), "normal")])
            h = None if h is None else self.emit1("add", [h, self.input((c,), "normal")])
        h = None if h is None else self.emit1("matmul", [h, self.input((c, self.dim()), "normal")])
        h = None if h is None else self.emit1(str(self.rng.choice(["relu", "tanh"])), [h])
        h = None if h is None else self.emit1("matmul", [h, self.input((self.shape(h)[-1], c), "normal")])
        if h is not None and self.chance(0.5):
            self.emit1("add", [h, x])


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return all(x == y or x == 1 or y == 1 for x, y in zip(a[::-1], b[::-1]))


def generate(seed: int, max_dim: int = 16, max_numel: int = 4096, max_ops: int = 12) -> Program:
    """A random valid program of up to max_ops ops (patterns add several at once), from seed alone."""
    g = _Gen(seed, max_dim, max_numel)
    nd = int(g.rng.integers(0, 4))
    g.input(tuple(g.dim() for _ in range(nd)))
    target = int(g.rng.integers(2, max_ops + 1))
    for _ in range(4 * target):
        if len(g.prog["ops"]) >= target:
            break
        g.step()
    if not g.prog["ops"]:
        g.emit("add", [next(iter(g.prog["inputs"]))] * 2)
    made = [n for op in g.prog["ops"] for n in op["out"]]
    outs = {made[-1]}
    for _ in range(int(g.rng.integers(0, 3))):
        outs.add(str(g.rng.choice(made)))
    g.prog["outputs"] = [n for n in made if n in outs]
    # a quarter run as a @function closing over their last input (a stream of its own: the ops stay the seed's)
    g.prog["function"] = len(g.prog["inputs"]) > 1 and np.random.default_rng([seed, FUNCTION_STREAM]).random() < 0.25
    return prune(g.prog)


# ---------------------------------------------------------------- the shrinker
def prune(prog: Program) -> Program:
    """prog without the ops and inputs no output depends on."""
    need = set(prog["outputs"])
    keep = []
    for op in reversed(prog["ops"]):
        if need & set(op["out"]):
            keep.append(op)
            need |= set(op["args"])
    return {**prog, "ops": keep[::-1], "inputs": {k: v for k, v in prog["inputs"].items() if k in need}}


def size(prog: Program) -> tuple[int, int, int, int]:
    """What shrinking makes smaller, most important first: ops, input elements, outputs, unplain inputs."""
    return (len(prog["ops"]), sum(int(np.prod(v["shape"])) for v in prog["inputs"].values()), len(prog["outputs"]),
            sum(v["fill"] != "ones" for v in prog["inputs"].values()))


def _bypass(prog: Program, drop: set[int]) -> Program:
    """prog with the ops at the indices in drop removed, each of their outputs replaced by their first argument."""
    sub: dict[str, str] = {}
    ops = []
    for i, op in enumerate(prog["ops"]):
        args = [sub.get(a, a) for a in op["args"]]
        if i in drop:
            sub.update(dict.fromkeys(op["out"], args[0]))
        else:
            ops.append({**op, "args": args})
    outs = list(dict.fromkeys(sub.get(o, o) for o in prog["outputs"]))
    return {**prog, "ops": ops, "outputs": [o for o in outs if o not in prog["inputs"]]}


def _with_dims(prog: Program, change: Callable[[str, int, int], int]) -> Program:
    """prog with every input dim d (of input k, axis a) replaced by change(k, a, d); expand and unflatten params
    are changed alike where they named the same size."""
    out = copy.deepcopy(prog)
    remap: dict[int, int] = {}
    for k, spec in out["inputs"].items():
        new = [change(k, a, d) for a, d in enumerate(spec["shape"])]
        remap.update({d: n for d, n in zip(spec["shape"], new) if d != n})
        spec["shape"] = new
    for op in out["ops"]:
        for key in ("shape", "sizes"):
            if key in op["p"]:
                op["p"][key] = [remap.get(d, d) for d in op["p"][key]]
    return out


def candidates(prog: Program) -> Iterator[Program]:
    """Smaller variants of prog, the biggest cuts first (delta debugging over the ops, then dims, then inputs)."""
    outs = prog["outputs"]
    if len(outs) > 1:
        for o in outs:
            yield {**prog, "outputs": [o]}
    n = len(prog["ops"])
    chunk = n // 2
    while chunk >= 1:
        for start in range(0, n, chunk):
            yield _bypass(prog, set(range(start, min(n, start + chunk))))
        chunk //= 2
    dims = sorted({d for v in prog["inputs"].values() for d in v["shape"] if d > 1}, reverse=True)
    for d in dims:  # one size everywhere, with its small multiples (C and 3C of a fused projection)
        for m in sorted({1, d // 2, d - 1}):
            yield _with_dims(prog, lambda k, a, x, d=d, m=m: m * (x // d) if x % d == 0 and x // d <= 4 else x)
    for name, spec in prog["inputs"].items():
        for axis, d in enumerate(spec["shape"]):
            for m in sorted({1, d // 2, d - 1}) if d > 1 else ():
                yield _with_dims(prog, lambda k, a, x, name=name, axis=axis, m=m: m if (k, a) == (name, axis) else x)
    for name, spec in prog["inputs"].items():
        if spec["fill"] != "ones":
            yield {**prog, "inputs": {**prog["inputs"], name: {**spec, "fill": "ones"}}}


def shrink(prog: Program, fails: Callable[[Program], bool], grad: bool = True,
           log: Callable[[str], None] | None = None) -> Program:
    """A smallest program (no single candidate step smaller still fails) that still fails; fails(prog) holds.
    Each candidate must be a valid program (torch runs it) and smaller by `size`."""
    best = prog
    tried: set[str] = set()
    improved = True
    while improved:
        improved = False
        for cand in candidates(best):
            cand = prune(cand)
            key = json.dumps(cand, sort_keys=True)
            if not cand["ops"] or key in tried or size(cand) >= size(best):
                continue
            tried.add(key)
            if valid(cand, grad) and fails(cand):
                best, improved = cand, True
                if log:
                    log(f"  shrunk to {size(best)}")
                break
    return best


# ---------------------------------------------------------------- printing
def listing(prog: Program) -> str:
    """prog as readable lines: inputs with their shapes, then one line an op."""
    lines = [f"# {prog['dtype']}, seed {prog['seed']}" + (", as a @function" if prog.get("function") else "")]
    lines += [f"{k}: {tuple(v['shape'])} {v['fill']}" for k, v in prog["inputs"].items()]
    for op in prog["ops"]:
        p = "".join(f", {k}={v!r}" for k, v in op["p"].items())
        lines.append(f"{', '.join(op['out'])} = {op['op']}({', '.join(op['args'])}{p})")
    lines.append(f"outputs: {', '.join(prog['outputs'])}")
    return "\n".join(lines)


def regression_test(prog: Program, device: str, grad: bool, name: str) -> str:
    """A pytest function that fails while the device disagrees with torch on prog (for tests/tensor/test_fuzz.py)."""
    body = pprint.pformat(prog, width=112, compact=True).replace("\n", "\n" + " " * 11)
    return (f"def test_{name}() -> None:\n"
            f"    prog = {body}\n"
            f"    assert fuzzing.mismatches(prog, {device!r}, grad={grad}) == []\n")


def find(seed: int, device: str, grad: bool = True, **gen: Any) -> tuple[Program, list[str]]:
    """Generate the program of seed and check it on device: (program, mismatches)."""
    prog = generate(seed, **gen)
    return prog, mismatches(prog, device, grad)


DEVICE_SIZES: dict[str, dict[str, int]] = {
    "CPU": {"max_dim": 16, "max_numel": 4096}, "CL": {"max_dim": 16, "max_numel": 4096},
    "PYTHON": {"max_dim": 8, "max_numel": 512},
}
"""Generator sizes per device: the PYTHON runtime interprets every instruction, so it gets small tensors."""
