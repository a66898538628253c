"""Gradients of every differentiable Tensor op against float64 central finite differences, over random shapes
(non-powers of two, broadcasting), on every device; and the API: backward, .grad, requires_grad, gradient(),
Detach, ContiguousBackward, @function bodies.

The check is a directional one (as fast gradient checkers do): for a random direction v, the analytic gradient's
dot product with v must match (L(x + εv) − L(x − εv)) / 2ε, where L = Σ f(x)·r for a fixed random r. Two
evaluations per direction instead of two per element, so every device runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import uopviz
from uopviz import Tensor
from uopviz.tensor.gradient import GradientError

F64 = np.float64
SETTINGS = settings(max_examples=3, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])  # `device` holds no state


def _shape(draw: Any, nd: tuple[int, int] = (1, 3), hi: int = 5) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(1, hi), min_size=nd[0], max_size=nd[1])))


def gradcheck(fn: Callable[..., Tensor], arrays: list[np.ndarray], device: str, directions: int = 2,
              rtol: float = 1e-5) -> None:
    """fn's gradients at the float64 arrays agree with central differences along random directions."""
    rng = np.random.default_rng(0)
    xs = [Tensor(a.astype(F64), device=device, requires_grad=True) for a in arrays]
    out = fn(*xs)
    r = rng.standard_normal(out.shape)
    loss = (out * Tensor(r, device=device)).sum()
    grads = [g.numpy() for g in loss.gradient(*xs)]
    for _ in range(directions):
        vs = [rng.standard_normal(a.shape) for a in arrays]
        eps = 1e-6

        def at(sign: float, vs: list[np.ndarray] = vs, eps: float = eps) -> float:
            ts = [Tensor(a.astype(F64) + sign * eps * v, device=device) for a, v in zip(arrays, vs)]
            return float((fn(*ts).numpy().astype(F64) * r).sum())

        fd = (at(1) - at(-1)) / (2 * eps)
        analytic = sum(float((g * v).sum()) for g, v in zip(grads, vs))
        assert analytic == pytest.approx(fd, rel=rtol, abs=1e-6), f"analytic {analytic} vs finite differences {fd}"


UNARY: dict[str, tuple[Callable[[Tensor], Tensor], str]] = {
    # name: (function, input domain: "any" real, "pos" positive, "unit" inside (-1, 1))
    "neg": (lambda x: -x, "any"), "exp": (lambda x: x.exp(), "any"), "exp2": (lambda x: x.exp2(), "any"),
    "log": (lambda x: x.log(), "pos"), "log2": (lambda x: x.log2(), "pos"), "sqrt": (lambda x: x.sqrt(), "pos"),
    "rsqrt": (lambda x: x.rsqrt(), "pos"), "reciprocal": (lambda x: x.reciprocal(), "pos"),
    "sin": (lambda x: x.sin(), "any"), "cos": (lambda x: x.cos(), "any"), "tan": (lambda x: x.tan(), "unit"),
    "abs": (lambda x: x.abs(), "any"), "relu": (lambda x: x.relu(), "any"), "sigmoid": (lambda x: x.sigmoid(), "any"),
    "tanh": (lambda x: x.tanh(), "any"), "gelu": (lambda x: x.gelu(), "any"), "silu": (lambda x: x.silu(), "any"),
    "square": (lambda x: x * x, "any"), "pow_const": (lambda x: x ** 1.7, "pos"),
    "softmax": (lambda x: x.softmax(-1), "any"), "log_softmax": (lambda x: x.log_softmax(-1), "any"),
    "logsumexp": (lambda x: x.logsumexp(-1), "any"), "sum": (lambda x: x.sum(0), "any"),
    "mean": (lambda x: x.mean(), "any"), "var": (lambda x: x.cat(1 - x, dim=-1).var(-1), "any"),
    "std": (lambda x: x.cat(x * 2, dim=0).std(0), "any"),
    "max": (lambda x: x.max(-1), "any"), "min": (lambda x: x.min(0), "any"), "prod": (lambda x: x.prod(-1), "any"),
    "cumsum": (lambda x: x.cumsum(-1), "any"), "flip": (lambda x: x.flip(0), "any"),
    "transpose": (lambda x: x.T, "any"), "pad": (lambda x: x.pad(1), "any"),
    "slice": (lambda x: x[..., ::2], "any"), "reshape": (lambda x: x.reshape(-1), "any"),
    "repeat": (lambda x: x.repeat((2,) * x.ndim), "any"),
    "expand": (lambda x: x.unsqueeze(0).expand(3, *x.shape), "any"),
    "contiguous": (lambda x: x.contiguous() * x, "any"),
    "cat": (lambda x: x.cat(x * 2, dim=-1), "any"), "stack": (lambda x: x.stack(x.exp(), dim=0), "any"),
    "floor_sum": (lambda x: x.floor() + x, "any"), "sign_mul": (lambda x: x.sign() * x, "any"),
}


def _domain(a: np.ndarray, kind: str) -> np.ndarray:
    if kind == "pos":
        return np.abs(a) + 0.5
    if kind == "unit":
        return np.tanh(a) * 0.9
    return a


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(data=st.data())
def test_unary_gradients(name: str, data: Any, device: str) -> None:
    fn, kind = UNARY[name]
    shape = _shape(data.draw, (1, 3), 4 if device == "PYTHON" else 7)
    a = _domain(np.random.default_rng(len(shape)).standard_normal(shape), kind)
    gradcheck(fn, [a], device)


BINARY: dict[str, tuple[Callable[[Tensor, Tensor], Tensor], str]] = {
    "add": (lambda a, b: a + b, "any"), "sub": (lambda a, b: a - b, "any"), "mul": (lambda a, b: a * b, "any"),
    "div": (lambda a, b: a / b, "pos"), "pow": (lambda a, b: a ** b, "pos"),
    "maximum": (lambda a, b: a.maximum(b), "any"), "minimum": (lambda a, b: a.minimum(b), "any"),
    "where": (lambda a, b: (a > b).where(a * 2, b), "any"), "mod": (lambda a, b: a % b, "pos"),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_gradients_broadcast(name: str, data: Any, device: str) -> None:
    """The second operand has some axes of size 1 (or fewer axes): its gradient is summed over them."""
    fn, kind = BINARY[name]
    shape = _shape(data.draw, (1, 3), 4 if device == "PYTHON" else 6)
    keep = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    bshape = tuple(d if k else 1 for d, k in zip(shape, keep))[data.draw(st.integers(0, len(shape) - 1)):]
    rng = np.random.default_rng(len(shape) + sum(keep))
    a, b = _domain(rng.standard_normal(shape), kind), _domain(rng.standard_normal(bshape), kind)
    gradcheck(fn, [a, b], device)


@SETTINGS
@given(m=st.integers(1, 5), k=st.integers(1, 6), n=st.integers(1, 5), batch=st.integers(1, 3))
def test_matmul_gradient(m: int, k: int, n: int, batch: int, device: str) -> None:
    rng = np.random.default_rng(m * k * n)
    gradcheck(lambda a, b: a @ b, [rng.standard_normal((batch, m, k)), rng.standard_normal((k, n))], device)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 1, 2, 1), (1, 0, 1, 2)])
def test_conv2d_gradient(stride: int, padding: int, dilation: int, groups: int, device: str) -> None:
    rng = np.random.default_rng(stride + padding)
    x, w, b = rng.standard_normal((2, 2, 5, 6)), rng.standard_normal((4, 2 // groups, 3, 2)), rng.standard_normal(4)
    gradcheck(lambda x, w, b: x.conv2d(w, b, stride=stride, padding=padding, dilation=dilation, groups=groups),
              [x, w, b], device)


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_pool_gradient(pool: str, device: str) -> None:
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 7))
    gradcheck(lambda x: getattr(x, f"{pool}_pool2d")(2), [x], device)


def test_gather_scatter_gradients(device: str) -> None:
    rng = np.random.default_rng(2)
    idx = Tensor(np.array([3, 0, 3, 1], dtype=np.int32), device=device)
    gradcheck(lambda x: x.gather(idx, 1), [rng.standard_normal((2, 5))], device)
    gradcheck(lambda x, v: x.scatter_add(idx, v, 0), [rng.standard_normal((5, 3)), rng.standard_normal((4, 3))],
              device)
    gradcheck(lambda x: x[[1, 0, 1], 2:], [rng.standard_normal((3, 4))], device)


# ---------------------------------------------------------------- the API


def test_backward_accumulates_and_realizes(device: str) -> None:
    w = Tensor([[1.0, 2.0], [3.0, 4.0]], device=device, requires_grad=True)
    x = Tensor([[0.5, -1.0]], device=device)
    loss = (x @ w).sum()
    loss.backward()
    assert w.grad is not None and w.grad.is_realized and loss.is_realized
    np.testing.assert_allclose(w.grad.numpy(), [[0.5, 0.5], [-1, -1]])
    (x @ w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [[1, 1], [-2, -2]])


def test_gradient_does_not_mutate_and_handles_unused(device: str) -> None:
    a = Tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    b = Tensor([4.0], device=device)
    ga, gb = (a * a).sum().gradient(a, b)
    np.testing.assert_allclose(ga.numpy(), [2, 4, 6])
    np.testing.assert_allclose(gb.numpy(), [0])
    assert a.grad is None


def test_detach_stops_and_contiguous_backward_passes(device: str) -> None:
    a = Tensor([1.0, 2.0], device=device)
    (g,) = (a * a.detach()).sum().gradient(a)
    np.testing.assert_allclose(g.numpy(), [1, 2])
    cb = Tensor(uopviz.UOp(uopviz.Ops.CONTIGUOUS_BACKWARD, (a.uop,)), device=device)
    (g,) = (cb * 3).sum().gradient(a)
    np.testing.assert_allclose(g.numpy(), [3, 3])


def test_cast_gradient_is_cast_back(device: str) -> None:
    a = Tensor([1.0, 2.0], device=device, dtype="float64")
    (g,) = (a.float() * Tensor([3.0, 4.0], device=device)).sum().gradient(a)
    assert g.dtype == uopviz.dtypes.float64
    np.testing.assert_allclose(g.numpy(), [3, 4])


def test_output_gradient_for_non_scalar(device: str) -> None:
    a = Tensor([1.0, 2.0], device=device, requires_grad=True)
    with pytest.raises(GradientError, match="non-scalar"):
        (a * 2).backward()
    (a * 3).backward(Tensor([1.0, 10.0], device=device))
    np.testing.assert_allclose(a.grad.numpy(), [3, 30])


def test_errors() -> None:
    with pytest.raises(GradientError, match="float"):
        Tensor([1, 2]).requires_grad = True
    with pytest.raises(GradientError, match="requires a gradient"):
        Tensor([1.0]).sum().backward()
    assert issubclass(GradientError, RuntimeError)


def test_gradient_through_function(device: str) -> None:
    """A @function's body is differentiated; the backward pass is a Function too (compiled once per body)."""
    w = Tensor(np.array([[1.0, -2.0], [0.5, 3.0]]), device=device)

    @uopviz.function
    def layer(x: Tensor, b: Tensor) -> Tensor:
        return (x @ w + b).tanh()

    rng = np.random.default_rng(3)
    gradcheck(layer, [rng.standard_normal((3, 2)), rng.standard_normal(2)], device)
    x = Tensor(rng.standard_normal((3, 2)), device=device)
    (gw,) = layer(x, Tensor(np.zeros(2), device=device)).sum().gradient(w)   # w is closed over: an implicit argument
    xn = x.numpy()
    np.testing.assert_allclose(gw.numpy(), xn.T @ (1 - np.tanh(xn @ w.numpy()) ** 2), rtol=1e-6)
    y = layer(x, Tensor(np.zeros(2), device=device))
    (g,) = y.sum().gradient(x)
    fn = next(u for u in g.uop.toposort() if u.op is uopviz.Ops.FUNCTION and str(u.arg).endswith("_backward"))
    assert fn.arg == "layer_backward"


@pytest.mark.parametrize("op", ["exp", "expm1", "log1p", "tanh", "erf", "erfc", "gelu", "conv2d"])
def test_own_gradient_rules_inside_a_function_that_closes_over_a_buffer(device: str, op: str) -> None:
    """A @function reading a buffer it closed over is rebuilt with that buffer as a Param; the special functions'
    own gradient rules (and convolution's) go with their nodes. They did not: backprop went through the parts of
    exp's bit tricks, and the gradient of (x @ w + b).tanh() was 0.39 off (the fuzzer's model family found none:
    it calls no @function)."""
    rng = np.random.default_rng(7)
    w = Tensor(rng.standard_normal((3, 3)) * 0.5, device=device)
    f = {"conv2d": lambda t: t.reshape(1, 1, 5, 3).conv2d(w.reshape(1, 1, 3, 3), padding=1)}.get(
        op, lambda t: getattr((t @ w).abs().add(0.5) if op == "log1p" else t @ w, op)())
    gradcheck(uopviz.function(lambda x, b: f(x + b)), [rng.standard_normal((5, 3)), rng.standard_normal(3)], device)


def test_a_function_whose_first_output_is_bool_passes_gradients_through_the_others(device: str) -> None:
    """A Function node's dtype is its first output's: a bool first output (a mask) kept the whole call off the
    path to the loss, so every argument's gradient came out 0 (found by the fuzzer's @function programs, seed
    1069)."""
    a, c = np.array([0.5, -1.0, 2.0, -0.25, 1.5]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    x, z = Tensor(a, device=device, requires_grad=True), Tensor(c, device=device, requires_grad=True)
    mask, y = uopviz.function(lambda x, z: (x.gt(0), x.gt(0).where(x, z).sum()))(x, z)
    gx, gz = y.gradient(x, z)
    np.testing.assert_array_equal(mask.numpy(), a > 0)
    np.testing.assert_array_equal(gx.numpy(), (a > 0).astype(np.float64))
    np.testing.assert_array_equal(gz.numpy(), (a <= 0).astype(np.float64))


def test_function_arguments_with_the_same_gradient(device: str) -> None:
    """x and y of x + y have one gradient node: the backward Function listed it as two outputs, and the second
    was never written (garbage such as 8e32; found by the fuzzer's @function programs, seeds 4112 and 4170)."""
    a, b, c = np.array([[0.5]]), np.array([[1.5]]), np.array([[1.0, 2.0, 3.0]])
    x, y, z = (Tensor(v, device=device, requires_grad=True) for v in (a, b, c))
    out = uopviz.function(lambda x, y, z: (y + x).reshape(1) @ z)(x, y, z)
    gx, gy, gz = (out * Tensor(np.array([1.0, -2.0, 0.5]), device=device)).sum().gradient(x, y, z)
    np.testing.assert_allclose(gx.numpy(), [[-1.5]])
    np.testing.assert_allclose(gy.numpy(), [[-1.5]])
    np.testing.assert_allclose(gz.numpy(), [[2.0, -4.0, 1.0]])


def test_second_function_output_and_tuple(device: str) -> None:
    @uopviz.function
    def two(x: Tensor) -> tuple[Tensor, Tensor]:
        return x * 2, x.exp()

    gradcheck(lambda x: two(x)[1] + two(x)[0] * 3, [np.array([0.1, -0.4, 0.7])], device)


def test_gradient_with_respect_to_what_a_function_closes_over(device: str) -> None:
    """The backward Function of x·w with respect to the closed-over w reads x and the output gradient but not w:
    it is called with only the arguments it reads (it was a KeyError in function_schedule)."""
    w = Tensor(np.array([1.0, -2.0, 0.5]), device=device, requires_grad=True)

    @uopviz.function
    def scale(x: Tensor) -> Tensor:
        return x * w

    x = Tensor(np.array([3.0, 4.0, -1.0]), device=device)
    (gw,) = scale(x).sum().gradient(w)
    np.testing.assert_allclose(gw.numpy(), [3.0, 4.0, -1.0])
    (scale(x) * scale(x)).sum().backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), 2 * np.array([3.0, 4.0, -1.0]) ** 2 * w.numpy())


def test_a_realized_output_refuses_a_gradient_by_name() -> None:
    """Realizing ends a graph: a gradient taken through it afterwards was silently zeros (gradient) or found no
    leaf (backward); both now say why, and taking it first still works."""
    w = Tensor(np.ones(3, np.float32), requires_grad=True)
    y = (w * 2).sum()
    assert y.item() == 6
    with pytest.raises(GradientError, match="realized"):
        y.gradient(w)
    with pytest.raises(GradientError, match="realized"):
        y.backward()
    z = (w * 3).sum()
    np.testing.assert_array_equal(z.gradient(w)[0].numpy(), [3, 3, 3])
    assert z.backward().item() == 9 and w.grad is not None
