"""Contractions and windows: matmul (SPEC's gemm composition, batched with broadcasting), conv2d and pooling.

Windows are built without any Python loop over output pixels: the input is tiled, cut and reshaped so that
every (output position, kernel offset) pair becomes an axis (`_pool`), and the kernel is then one broadcast
multiply and one sum over the window axes. A convolution's gradients are convolutions again (`_conv_grads`), not
the chain rule through the window view.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import TYPE_CHECKING, Any

from uopviz.dtype import dtypes, least_upper_dtype
from uopviz.tensor.gradient import own_gradient
from uopviz.tensor.reduce import acc_dtypes
from uopviz.tensor.template import templated
from uopviz.tensor.util import (
    ArgumentError,
    ShapeError,
    broadcast_shapes,
    concrete,
    expand_to,
    fmt,
    int_dim,
    int_dims,
)
from uopviz.uop.ops import Ops, UOp, all_ints

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor


def _tuple(v: int | tuple[int, ...], nd: int, what: str, least: int = 1) -> tuple[int, ...]:
    """An int for every spatial axis, or a tuple of nd of them, each >= least."""
    out = (v,) * nd if isinstance(v, int) else tuple(v)
    if len(out) != nd or not all(isinstance(x, int) and not isinstance(x, bool) and x >= least for x in out):
        raise ShapeError(f"{what} must be an int >= {least} or {nd} of them, got {v!r}")
    return out


def _padding(p: Any, nd: int, negative: bool = False) -> list[tuple[int, int]]:
    """conv/pool padding as one (before, after) pair per spatial axis, from an int, one int per axis, one pair per
    axis, or 2·nd ints last axis first ((l, r, t, b) for 2-D: F.pad's and tinygrad's order). negative: a pad below
    0 crops (tinygrad's conv2d and pools), else it is refused as torch refuses it."""
    if isinstance(p, int) and not isinstance(p, bool):
        p = (p,) * nd
    flat = isinstance(p, (tuple, list)) and all(isinstance(q, int) and not isinstance(q, bool) for q in p)
    if flat and len(p) == 2 * nd:
        pairs = [(p[2 * j], p[2 * j + 1]) for j in reversed(range(nd))]
    elif isinstance(p, (tuple, list)):
        pairs = [(q, q) if isinstance(q, int) and not isinstance(q, bool) else tuple(q) for q in p]
    else:
        pairs = []
    least = -math.inf if negative else 0
    if len(pairs) != nd or not all(len(q) == 2 and all(isinstance(x, int) and x >= least for x in q) for q in pairs):
        raise ShapeError(f"padding must be an int, {nd} ints, {nd} (before, after) pairs or {2 * nd} ints (last axis "
                         f"first){'' if negative else ', none below 0'}, got {p!r}")
    return pairs


def _crop(x: Tensor, pads: list[tuple[int, int]]) -> tuple[Tensor, list[tuple[int, int]]]:
    """The negative parts of pads cut from x's last len(pads) axes (tinygrad's negative padding), and the rest."""
    nd = len(pads)
    if all(b >= 0 and a >= 0 for b, a in pads):
        return x, pads
    cuts = [(max(-b, 0), max(-a, 0)) for b, a in pads]
    if any(b + a >= d for (b, a), d in zip(cuts, x.shape[-nd:])):
        raise ShapeError(f"negative padding {pads} crops all of the spatial dims {fmt(x.shape[-nd:])}")
    x = x.shrink([None] * (x.ndim - nd) + [(b, d - a) for (b, a), d in zip(cuts, x.shape[-nd:])])
    return x, [(max(b, 0), max(a, 0)) for b, a in pads]


def conv_padding(padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...],
                 dilation: tuple[int, ...]) -> Any:
    """torch's padding strings as pairs: "valid" is none, "same" keeps each size (the odd one after), only at
    stride 1, as torch (F.conv2d and nn.Conv2d); any other string is refused. Other paddings are returned as they
    are."""
    if not isinstance(padding, str):
        return padding
    if padding == "valid":
        return 0
    if padding != "same":
        raise ArgumentError(f"invalid padding string {padding!r}, should be one of 'valid', 'same'")
    if any(s != 1 for s in stride):
        raise ArgumentError(f"padding='same' is not supported for strided convolutions (stride {stride}); pad "
                            "explicitly")
    return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]


def _pool_dims(kernel_size: Any) -> int:
    """The spatial dims a *_pool2d pools: two, or as many as a tuple kernel_size has (tinygrad's)."""
    return len(kernel_size) if isinstance(kernel_size, (tuple, list)) and kernel_size else 2


def _pool_out(i: int, k: int, s: int, d: int, pad: tuple[int, int], ceil_mode: bool) -> int:
    """PyTorch's output size of a window axis; with ceil_mode the last partial window counts when it starts inside
    the input or its left padding."""
    span = i + pad[0] + pad[1] - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    return out - 1 if ceil_mode and (out - 1) * s >= i + pad[0] else out


def _conv_grads(g: Tensor, inputs: tuple[Tensor, ...], need: tuple[bool, ...], pads: list[tuple[int, int]],
                stride: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> tuple[Tensor | None, ...]:
    """conv's gradients as convolutions: the input's is the transposed convolution of g with the weight, the
    weight's the correlation of the input's windows with g. Through the window view the chain rule gives the same
    values as a col2im that sums the window copies back through div/mod index chains, several times slower."""
    x, w = inputs
    nd = w.ndim - 2
    n, cout, *outs = g.shape
    ks = int_dims(w.shape[2:], "conv's kernel")
    g = g.contiguous()  # both gradients read it, each many times: computed once, not in every read
    dx = dw = None
    if need[0]:
        # rows of the padded input past the last window get no gradient: output_padding restores them
        extra = [i + b + a - ((o - 1) * s + d * (k - 1) + 1)
                 for i, (b, a), o, s, d, k in zip(x.shape[2:], pads, outs, stride, dilation, ks)]
        dx = g.conv_transpose(w, None, stride, pads, extra, dilation, groups).cast(x.dtype)
    if need[1]:
        win = x._conv_windows(pads, ks, stride, dilation, groups)              # (N, G, 1, Cin/G, *out, *ks)
        sp, kk = range(4, 4 + nd), range(4 + nd, 4 + 2 * nd)
        win = win.permute(0, *sp, 1, *kk, 3, 2)                                # (N, *out, G, *ks, Cin/G, 1)
        # g copied with its channels innermost: they are the dW kernel's innermost output axis, so the heuristic's
        # matmul tile reads them in vectors (read from g as it is laid out, each vector was a gather: 5.8 GFLOP/s)
        gt = g.permute(0, *range(2, 2 + nd), 1).contiguous()                   # (N, *out, Cout)
        gt = gt.reshape(n, *outs, groups, *(1,) * nd, 1, cout // groups)
        dw = win.mul(gt).sum(tuple(range(1 + nd)))                            # (G, *ks, Cin/G, Cout/G)
        dw = dw.permute(0, 2 + nd, 1 + nd, *range(1, 1 + nd)).reshape(w.shape).cast(w.dtype)
    return dx, dw


_GEMM_DTYPES = frozenset({dtypes.float32, dtypes.float64})


def _plain_gemm(a: UOp, b: UOp) -> bool:
    """Whether a @ b is the common case of a model's products, which matmul builds at once (no Tensor between, no
    checks that cannot fail here): one float32 or float64 dtype, both operands of at least 2 dims, every size an int
    and the contracted ones equal. Anything else takes the general path (which words the errors). A GPT forward
    makes 13 products per call in eager mode."""
    dt, sa, sb = a.dtype, a.shape, b.shape
    return dt in _GEMM_DTYPES and b.dtype is dt and len(sa) >= 2 and len(sb) >= 2 and all_ints(sa) and \
        all_ints(sb) and sa[-1] == sb[-2]


def _gemm_graph(a: UOp, b: UOp) -> UOp:
    """SPEC's gemm of a @ b, (A[..., M, K, 1] · B[..., 1, K, N]).sum(K), batch axes broadcast, for operands of one
    dtype of at least 2 dims each whose contracted dims are equal (matmul checks): the graph the Tensor ops would
    build (the operands reshaped and expanded, multiplied, or and-ed for bools, summed in the dtype sum takes, the
    contracted axis reshaped away), built from the UOps at once, the one place both of matmul's paths build it."""
    dt, sa, sb = a.dtype, a.shape, b.shape
    m, k, n = sa[-2], sa[-1], sb[-1]
    batch = sa[:-2] if sa[:-2] == sb[:-2] else broadcast_shapes(sa[:-2], sb[:-2])
    full = (*batch, m, k, n)
    prod = UOp(Ops.AND if dt.is_bool else Ops.MUL,
               (expand_to(a.reshape((*sa, 1)), full), expand_to(b.reshape((*sb[:-2], 1, k, n)), full)))
    acc, out = acc_dtypes(dt)
    return prod.cast(acc).reduce(Ops.ADD, axes=(len(full) - 2,)).reshape((*batch, m, n)).cast(out)


class NNMixin:
    """matmul, conv2d and pooling of Tensor."""

    __slots__ = ()

    @templated
    def matmul(self: Tensor, w: Any, reverse: bool = False) -> Tensor:
        """NumPy's matmul: 1-D operands get a unit axis added and removed; batch axes broadcast.
        Each product is SPEC's gemm: (A[..., M, K, 1] · B[..., 1, K, N]).sum(K)."""
        a, b = (self, self._coerce(w)) if not reverse else (self._coerce(w), self)
        a._same_device(b)
        if _plain_gemm(a._uop, b._uop):
            return a._new(_gemm_graph(a._uop, b._uop))
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul needs operands of at least 1 dim, got {fmt(a.shape)} and {fmt(b.shape)}; "
                             "use * to scale by a scalar")
        dt = least_upper_dtype(a.dtype, b.dtype)
        a2 = a.cast(dt).unsqueeze(0) if a.ndim == 1 else a.cast(dt)
        b2 = b.cast(dt).unsqueeze(-1) if b.ndim == 1 else b.cast(dt)
        k, k2 = a2.shape[-1], b2.shape[-2]
        if k != k2:
            raise ShapeError(f"matmul {fmt(a.shape)} @ {fmt(b.shape)}: the contracted dims differ ({k} vs {k2}); "
                             "the last axis of the left operand must match the second-to-last of the right")
        broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        # halves are multiplied in float32, as torch and tensor cores do: each product is exact there, where in half
        # a product of two values near 300 overflowed before the float32 sum saw it; ints wrap as NumPy's
        wide = dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt
        out = a._new(_gemm_graph(a2.cast(wide)._uop, b2.cast(wide)._uop)).cast(dt)
        if a.ndim == 1:
            out = out.squeeze(-2)
        return out.squeeze(-1) if b.ndim == 1 else out

    def dot(self: Tensor, w: Any) -> Tensor:
        return self.matmul(w)

    def __matmul__(self, w: Any) -> Tensor:
        return self.matmul(w)

    def __rmatmul__(self, w: Any) -> Tensor:
        return self.matmul(w, reverse=True)

    def _pool(self: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], dilation: tuple[int, ...]) -> Tensor:
        """Sliding windows over the last len(kernel) axes: (..., i0, i1) -> (..., o0, o1, k0, k1), where
        out[..., a, b] = x[..., a·s + b·d]. Each axis is tiled, cut to k·(i+d) and reshaped to (k, i+d): row j
        then starts j·d later in x, so column a·s of row j holds x[a·s + j·d]."""
        nd = len(kernel)
        lead, ins = self.shape[:-nd], int_dims(self.shape[-nd:], "windows (conv, pooling, unfold)")
        outs = [(i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(ins, kernel, stride, dilation)]
        if any(o <= 0 for o in outs):
            raise ShapeError(f"a window of {kernel} (dilation {dilation}) does not fit in {fmt(ins)}; "
                             "pad the input or use a smaller kernel")
        reps = [math.ceil(k * (i + d) / i) for i, k, d in zip(ins, kernel, dilation)]
        x = self.reshape(*lead, *(v for i in ins for v in (1, i)))
        x = x.expand(*lead, *(v for r, i in zip(reps, ins) for v in (r, i))).reshape(*lead, *(r * i for r, i in
                                                                                             zip(reps, ins)))
        x = x.shrink([None] * len(lead) + [(0, k * (i + d)) for i, k, d in zip(ins, kernel, dilation)])
        x = x.reshape(*lead, *(v for i, k, d in zip(ins, kernel, dilation) for v in (k, i + d)))
        cols = [(i + d, o * s) for i, d, o, s in zip(ins, dilation, outs, stride)]
        x = x.pad([(0, 0)] * len(lead) + [p for have, want in cols for p in ((0, 0), (0, max(want - have, 0)))])
        x = x.shrink([None] * len(lead) + [p for _, want in cols for p in (None, (0, want))])
        x = x.reshape(*lead, *(v for k, o, s in zip(kernel, outs, stride) for v in (k, o, s)))
        x = x.shrink([None] * len(lead) + [p for _ in kernel for p in (None, None, (0, 1))])
        x = x.reshape(*lead, *(v for k, o in zip(kernel, outs) for v in (k, o)))
        nl = len(lead)
        return x.permute(*range(nl), *(nl + 2 * j + 1 for j in range(nd)), *(nl + 2 * j for j in range(nd)))

    def conv(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
             dilation: Any = 1, groups: int = 1) -> Tensor:
        """Cross-correlation over the last nd = weight.ndim − 2 axes of an (N, Cin, *spatial) input (or an unbatched
        (Cin, *spatial) one) with a (Cout, Cin/groups, *kernel) weight: one broadcast multiply of the input's
        windows by the weight and one sum. padding is an int, nd ints, nd (before, after) pairs, or "same"."""
        nd = weight.ndim - 2
        if nd < 1 or self.ndim not in (nd + 1, nd + 2):
            raise ShapeError(f"conv with a {weight.ndim}-D weight {fmt(weight.shape)} ({nd} spatial dims) needs an "
                             f"(N, C, *spatial) or (C, *spatial) input of {nd + 2} or {nd + 1} dims, got a "
                             f"{self.ndim}-D {fmt(self.shape)}")
        if self.ndim == nd + 1:
            return self.unsqueeze(0).conv(weight, bias, stride, padding, dilation, groups).squeeze(0)
        n, c = self.shape[:2]
        cout, cin_g = weight.shape[:2]
        ks = int_dims(weight.shape[2:], "conv's kernel")
        if not isinstance(groups, int) or groups < 1 or c % groups or cout % groups or c // groups != cin_g:
            raise ShapeError(f"conv: input channels {c}, weight {fmt(weight.shape)} and groups={groups} do not fit; "
                             "need Cin = groups · weight.shape[1] and Cout divisible by groups")
        st, dil = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
        x, pads = _crop(self, _padding(conv_padding(padding, ks, st, dil), nd, negative=True))
        win = x._conv_windows(pads, ks, st, dil, groups)                       # (N, G, 1, Cin/G, *out, *ks)
        w = weight.reshape(1, groups, cout // groups, cin_g, *(1,) * nd, *ks)
        out = win.mul(w).sum((3, *range(4 + nd, 4 + 2 * nd))).reshape(n, cout, *win.shape[4:4 + nd])
        out = own_gradient(out, (x, weight), functools.partial(_conv_grads, pads=pads, stride=st, dilation=dil,
                                                                groups=groups))
        if bias is None:
            return out
        if bias.shape != (cout,):
            raise ShapeError(f"conv bias must have shape ({cout},), got {fmt(bias.shape)}")
        return out.add(bias.reshape(1, cout, *(1,) * nd))

    def _conv_windows(self: Tensor, pads: list[tuple[int, int]], ks: tuple[int, ...], stride: tuple[int, ...],
                      dilation: tuple[int, ...], groups: int) -> Tensor:
        """The padded input's windows as conv multiplies them, (N, groups, 1, Cin/groups, *out, *ks)."""
        n, c = self.shape[:2]
        win = self.pad([(0, 0), (0, 0), *pads])._pool(ks, stride, dilation)  # (N, C, *out, *ks)
        return win.reshape(n, groups, 1, c // groups, *win.shape[2:])

    def conv1d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1, groups: int = 1) -> Tensor:
        return self._conv_nd(1, weight, bias, stride, padding, dilation, groups)

    def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1, groups: int = 1) -> Tensor:
        """Cross-correlation of an (N, Cin, H, W) or (Cin, H, W) input with a (Cout, Cin/groups, kH, kW) weight;
        over as many spatial dims as the weight has (tinygrad's conv2d is N-d; torch's takes 2 only)."""
        return self.conv(weight, bias, stride, padding, dilation, groups)

    def conv3d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
               dilation: Any = 1, groups: int = 1) -> Tensor:
        return self._conv_nd(3, weight, bias, stride, padding, dilation, groups)

    def _conv_nd(self: Tensor, nd: int, weight: Tensor, *args: Any) -> Tensor:
        if weight.ndim != nd + 2:
            raise ShapeError(f"conv{nd}d needs a {nd + 2}-D weight (Cout, Cin/groups, {nd} kernel dims), got "
                             f"{fmt(weight.shape)}")
        return self.conv(weight, *args)

    def conv_transpose2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
                         padding: Any = 0, output_padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
        """The gradient of conv2d with respect to its input: zeros inserted between the input's elements (stride),
        padded by dilation·(k − 1) − padding (plus output_padding after), convolved with the flipped weight whose
        in and out channels are swapped. weight: (Cin, Cout/groups, kH, kW)."""
        return self.conv_transpose(weight, bias, stride, padding, output_padding, dilation, groups)

    def conv_transpose(self: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                       output_padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
        """conv_transpose2d over nd = weight.ndim − 2 spatial axes."""
        nd = weight.ndim - 2
        if nd < 1 or self.ndim != nd + 2:
            raise ShapeError(f"conv_transpose needs an (N, C, *spatial) input of {nd + 2} dims for a weight of shape "
                             f"{fmt(weight.shape)}, got {fmt(self.shape)}")
        cin, cout_g, *ks = weight.shape
        if not isinstance(groups, int) or groups < 1 or cin % groups or self.shape[1] != cin:
            raise ShapeError(f"conv_transpose: input channels {self.shape[1]}, weight {fmt(weight.shape)} and "
                             f"groups={groups} do not fit; need Cin = weight.shape[0], divisible by groups")
        st, dil = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
        pads, outp = _padding(padding, nd), _tuple(output_padding, nd, "output_padding", 0)
        if any(s > 1 for s in st):
            out = self._conv_transpose_phases(weight, st, pads, outp, dil, groups)
            return out if bias is None else out.add(bias.reshape(-1, *(1,) * nd))
        full = [d * (k - 1) for k, d in zip(ks, dil)]
        edges = [(f - b, f - a + o) for f, (b, a), o in zip(full, pads, outp)]
        w = weight.reshape(groups, cin // groups, cout_g, *ks).transpose(1, 2).reshape(groups * cout_g, cin // groups,
                                                                                      *ks)
        out = self.conv(w.flip(tuple(range(2, 2 + nd))), bias, 1, [(max(b, 0), max(a, 0)) for b, a in edges], dil,
                        groups)
        if all(b >= 0 and a >= 0 for b, a in edges):
            return out
        # padding beyond the kernel's reach cuts the output instead
        return out.shrink([None, None, *((max(-b, 0), d - max(-a, 0)) for (b, a), d in zip(edges, out.shape[2:]))])

    def _conv_transpose_phases(self: Tensor, weight: Tensor, stride: tuple[int, ...], pads: list[tuple[int, int]],
                               outp: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Tensor:
        """A strided conv_transpose as stride-1 ones, one per phase: output i = q·s + r of the unpadded result gets
        the taps k with k·d ≡ r (mod s), each from input q − (k·d − r)/s, i.e. a stride-1 conv_transpose by the
        sub-kernel w[k0::s/gcd] with dilation d/gcd, shifted by (k0·d − r)/s; each phase computes just the rows the
        padding keeps, and a reshape interleaves them. The spread input (zeros between its elements) did s^nd times
        the work, on zeros, through mod-s index chains."""
        nd = len(stride)
        (n, _), cout, ins, ks = self.shape[:2], weight.shape[1] * groups, self.shape[2:], weight.shape[2:]
        full = [(i - 1) * s + d * (k - 1) + 1 + o for i, s, d, k, o in zip(ins, stride, dilation, ks, outp)]
        size = [f - b - a for f, (b, a) in zip(full, pads)]
        qs = [-(-m // s) for m, s in zip(size, stride)]                        # rows of each phase
        steps = [s // math.gcd(s, d) for s, d in zip(stride, dilation)]
        dils = tuple(d // math.gcd(s, d) for s, d in zip(stride, dilation))
        zero = self.zeros(n, cout, *qs, dtype=least_upper_dtype(self.dtype, weight.dtype), device=self.device)
        phases = []
        for phase in itertools.product(*(range(s) for s in stride)):       # by the kept result's row mod s
            taps, cuts, grow = [], [], []
            for p, (b, _), s, d, kk, step, dd, i, q in zip(phase, pads, stride, dilation, ks, steps, dils, ins, qs):
                r, first = (b + p) % s, (b + p) // s                           # the row mod s unpadded, its first q
                k0 = next((k for k in range(kk) if (k * d - r) % s == 0), None)
                if k0 is None:
                    break  # no tap reaches this phase
                # the stride-1 result covers rows shift .. shift + m − 1 of the phase; first .. first + q − 1 are kept
                shift, m = (k0 * d - r) // s, i + dd * (len(range(k0, kk, step)) - 1)
                before, after = first - shift, shift + m - first - q
                if max(before, 0) + max(after, 0) >= m:
                    break  # every row it reaches is cut off
                taps.append(slice(k0, None, step))
                cuts.append((max(before, 0), max(after, 0)))
                grow.append((max(-before, 0), max(-after, 0)))
            else:
                y = self.conv_transpose(weight[(slice(None), slice(None), *taps)], None, 1, cuts, 0, dils, groups)
                phases.append(y.pad([(0, 0), (0, 0), *grow]))
                continue
            phases.append(zero)
        out = phases[0].stack(*phases[1:])
        out = out.reshape(*stride, n, cout, *qs).permute(nd, nd + 1, *(v for j in range(nd) for v in (nd + 2 + j, j)))
        out = out.reshape(n, cout, *(q * s for q, s in zip(qs, stride)))
        # stored once: each element picks its phase through a chain of pads, which a consumer would walk per read
        return out.shrink([None, None, *((0, m) for m in size)]).contiguous()

    @templated
    def linear(self: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
        """self @ weight + bias (weight of shape (in, out), as tinygrad; nn.Linear passes its (out, in) one
        transposed)."""
        out = self.matmul(weight)
        return out if bias is None else out.add(bias)

    # ---------------------------------------------------------------- pooling
    def _pool_input(self: Tensor, nd: int) -> None:
        if self.ndim < nd + 1:
            raise ShapeError(f"{nd}-D pooling needs at least {nd + 1} dims ((C, *spatial) or (N, C, *spatial)), got "
                             f"{fmt(self.shape)}")

    def _windows(self: Tensor, nd: int, k: tuple[int, ...], stride: Any, pads: list[tuple[int, int]],
                 dilation: Any, ceil_mode: bool, fill: bool | int | float) -> Tensor:
        """The windows (..., *out, *kernel) of the last nd axes, padded by pads (each at most half the kernel, as
        torch) with fill, and, for ceil_mode, past the end with fill too."""
        st = _tuple(stride if stride is not None else k, nd, "stride")
        dil = _tuple(dilation, nd, "dilation")
        if any(2 * b > kk or 2 * a > kk for (b, a), kk in zip(pads, k)):
            raise ShapeError(f"pooling padding {pads} must be at most half the kernel {k}")
        ins = int_dims(self.shape[-nd:], "pooling")
        outs = [_pool_out(i, kk, s, d, p, ceil_mode) for i, kk, s, d, p in zip(ins, k, st, dil, pads)]
        full = [(b, max((o - 1) * s + d * (kk - 1) + 1 - i - b, a))
                for (b, a), o, s, d, kk, i in zip(pads, outs, st, dil, k, ins)]
        x = self.pad([(0, 0)] * (self.ndim - nd) + full, value=fill)
        win = x._pool(k, st, dil)
        return win.shrink([None] * (self.ndim - nd) + [(0, o) for o in outs] + [None] * nd)

    def max_pool(self: Tensor, nd: int, kernel_size: Any = 2, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
        """Max over windows of the last nd axes (padding counts as -inf; a negative one crops, as tinygrad's);
        with return_indices also where each max is, as an index into the flattened spatial input (PyTorch's, for
        max_unpool)."""
        self._pool_input(nd)
        lo = float("-inf") if self.dtype.is_float else self.dtype.min
        k = _tuple(kernel_size, nd, "kernel_size")
        given = _padding(padding, nd, negative=True)
        x, pads = _crop(self, given)
        win = x._windows(nd, k, stride, pads, dilation, ceil_mode, lo)
        axes = tuple(range(-nd, 0))
        out = win.max(axes)
        if not return_indices:
            return out
        ins = self.shape[-nd:]
        flat = _crop(type(self).arange(math.prod(ins), dtype="int32", device=self.device).reshape(ins), given)[0]
        fwin = flat._windows(nd, k, stride, pads, dilation, ceil_mode, -1)
        first = win.flatten(-nd).argmax(-1)                                   # (..., *out)
        picks = first.unsqueeze(-1).eq(type(self).arange(math.prod(k), device=self.device))
        return out, picks.where(fwin.flatten(-nd), 0).sum(-1).cast("int64")

    def avg_pool(self: Tensor, nd: int, kernel_size: Any = 2, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
        """Mean over windows of the last nd axes; the divisor counts the input's elements in the window, and its
        explicit padding with count_include_pad (never what ceil_mode adds), as PyTorch. A negative padding crops
        (tinygrad's)."""
        self._pool_input(nd)
        k = _tuple(kernel_size, nd, "kernel_size")
        x, pads = _crop(self._float(), _padding(padding, nd, negative=True))
        win = x._windows(nd, k, stride, pads, 1, ceil_mode, 0)
        mask = type(self).ones(*x.shape[-nd:], dtype=x.dtype, device=self.device).pad(
            pads, value=1.0 if count_include_pad else 0.0)
        count = mask._windows(nd, k, stride, [(0, 0)] * nd, 1, ceil_mode, 0)
        count = count.shrink([(0, o) for o in win.shape[-2 * nd:-nd]] + [None] * nd)
        axes = tuple(range(-nd, 0))
        return win.sum(axes).div(count.sum(axes))

    def max_pool1d(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return self.max_pool(1, *args, **kwargs)

    def max_pool2d(self: Tensor, kernel_size: Any = 2, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                   ceil_mode: bool = False, return_indices: bool = False) -> Any:
        """max_pool over the last two axes, or over as many as a tuple kernel_size names (tinygrad's)."""
        return self.max_pool(_pool_dims(kernel_size), kernel_size, stride, padding, dilation, ceil_mode,
                             return_indices)

    def max_pool3d(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return self.max_pool(3, *args, **kwargs)

    def avg_pool1d(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self.avg_pool(1, *args, **kwargs)

    def avg_pool2d(self: Tensor, kernel_size: Any = 2, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                   count_include_pad: bool = True) -> Tensor:
        """avg_pool over the last two axes, or over as many as a tuple kernel_size names (tinygrad's)."""
        return self.avg_pool(_pool_dims(kernel_size), kernel_size, stride, padding, ceil_mode, count_include_pad)

    def avg_pool3d(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        return self.avg_pool(3, *args, **kwargs)

    def max_unpool2d(self: Tensor, indices: Tensor, kernel_size: Any = 2, stride: Any = None, padding: Any = 0,
                     output_size: tuple[int, ...] | None = None) -> Tensor:
        """The inverse of max_pool2d(return_indices=True): each value put at its index in a zero (H, W) plane (of
        output_size, else the size the pooling came from)."""
        if indices.shape != self.shape:
            raise ShapeError(f"max_unpool2d: indices {fmt(indices.shape)} must have the input's shape "
                             f"{fmt(self.shape)}")
        k = _tuple(kernel_size, 2, "kernel_size")
        st = _tuple(stride if stride is not None else k, 2, "stride")
        pads = _padding(padding, 2)
        hw = tuple(output_size[-2:]) if output_size is not None else tuple(
            (i - 1) * s - b - a + kk for i, s, (b, a), kk in zip(self.shape[-2:], st, pads, k))
        lead = self.shape[:-2]
        vals, idx = self.flatten(-2).unsqueeze(-1), indices.flatten(-2).unsqueeze(-1)
        hit = idx.eq(type(self).arange(math.prod(hw), dtype=idx.dtype, device=self.device))
        lo = float("-inf") if self.dtype.is_float else self.dtype.min
        picked = hit.where(vals, lo).max(-2)  # overlapping windows may pick one element twice: it is put once
        return hit.any(-2).where(picked, 0).cast(self.dtype).reshape(*lead, *hw)

    # ---------------------------------------------------------------- layers as functions
    def dropout(self: Tensor, p: float = 0.5) -> Tensor:
        """Each element zeroed with probability p, the rest scaled by 1/(1 − p) (always: nn.Dropout applies it only
        while training). The mask is drawn from rand, so manual_seed makes it repeatable."""
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        if p == 0:
            return self
        keep = type(self).rand(*concrete(self.shape), device=self.device).ge(p)
        return keep.where(self._float().div(1 - p), 0.0) if p < 1 else self._float().mul(0)

    @templated
    def layernorm(self: Tensor, axis: int | tuple[int, ...] = -1, eps: float = 1e-5) -> Tensor:
        """(x − mean) / √(var + eps) over the axes, with the biased variance (as LayerNorm). A half-precision input
        is normalized in float32 and the result rounded back, as torch's layer_norm does: its squares overflow a
        float16 (max 65504) from values of about 256 on."""
        x = self._float()
        wide = x.cast(dtypes.float32) if x.dtype.itemsize < 4 else x
        centred = wide.sub(wide.mean(axis, keepdim=True))
        return centred.mul(centred.square().mean(axis, keepdim=True).add(eps).rsqrt()).cast(x.dtype)

    def normalize(self: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
        """x / max(‖x‖_p, eps) along dim (torch.nn.functional.normalize), with torch.norm's ‖x‖_p: (Σ|x|^p)^(1/p)
        has no value at p = 0 or ±inf, where it is the count of non-zeros and the largest or smallest |x|."""
        x = self._float()
        a = x.abs()
        if p == 0:
            norm = a.ne(0).sum(dim, keepdim=True).cast(x.dtype)
        elif math.isinf(p):
            norm = a.max(dim, keepdim=True) if p > 0 else a.min(dim, keepdim=True)
        else:
            norm = a.pow(p).sum(dim, keepdim=True).pow(1 / p)
        return x.div(norm.maximum(eps))

    def scaled_dot_product_attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                     dropout_p: float = 0.0, is_causal: bool = False,
                                     scale: float | None = None, enable_gqa: bool = False) -> Tensor:
        """softmax(q·kᵀ·scale + mask)·v over (..., L, E) queries and (..., S, E) keys: a bool mask keeps where true
        (−inf elsewhere), a float mask is added; is_causal keeps key j <= query i. scale defaults to 1/√E.
        enable_gqa: keys and values of fewer heads (axis -3) serve groups of query heads, as in torch."""
        if attn_mask is not None and is_causal:
            raise ArgumentError("scaled_dot_product_attention takes attn_mask or is_causal, not both")
        if enable_gqa and self.ndim >= 3 and key.shape[-3] != self.shape[-3]:
            key = key.repeat_interleave(int_dim(self.shape[-3] // key.shape[-3], "grouped query heads"), -3)
            value = value.repeat_interleave(int_dim(self.shape[-3] // value.shape[-3], "grouped query heads"), -3)
        if dropout_p:
            return self._attention_weights(key, attn_mask, is_causal, scale).dropout(dropout_p).matmul(value)
        return self._attention(key, value, attn_mask, is_causal, scale)

    @templated
    def _attention(self: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, is_causal: bool,
                   scale: float | None) -> Tensor:
        """Attention without dropout: a function of its inputs' signatures (templated)."""
        return self._attention_weights(key, attn_mask, is_causal, scale).matmul(value)

    def _attention_weights(self: Tensor, key: Tensor, attn_mask: Tensor | None, is_causal: bool,
                           scale: float | None) -> Tensor:
        """softmax(q·kᵀ·scale + mask) over the keys."""
        q = self._float()
        scores = q.matmul(key.transpose(-2, -1))
        scores = scores.mul(scale if scale is not None else 1 / math.sqrt(int_dim(q.shape[-1], "attention's scale")))
        if is_causal:
            n, m = scores.shape[-2:]
            attn_mask = type(self).ones(n, m, dtype="bool", device=self.device).tril()
        if attn_mask is not None:
            scores = attn_mask.where(scores, float("-inf")) if attn_mask.dtype.is_bool else scores.add(attn_mask)
        return scores.softmax(-1)

    @staticmethod
    def einsum(formula: str, *operands: Any) -> Tensor:
        """Einstein summation (`Tensor.einsum("ij,jk->ik", a, b)`): every operand's axes are lined up by letter
        (a repeated letter in one operand takes its diagonal; "..." stands for the leading axes), multiplied with
        broadcasting, and summed over the letters not in the output (implicit output: the letters used once,
        sorted)."""
        ops = list(operands)
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
        formula = formula.replace(" ", "")
        lhs, arrow, rhs = formula.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(ops):
            raise ValueError(f"einsum {formula!r} names {len(terms)} operands, got {len(ops)}")
        spare = iter(sorted(set("ABCDEFGHIJKLMNOPQRSTUVWXYZ") - set(formula)))
        nell = max((t.ndim - len(term.replace("...", "")) for term, t in zip(terms, ops) if "..." in term), default=0)
        ell = "".join(next(spare) for _ in range(nell))
        terms = [term.replace("...", ell[nell - (t.ndim - len(term.replace("...", ""))):])
                 for term, t in zip(terms, ops)]
        if not arrow:
            counts = {c: "".join(terms).count(c) for c in "".join(terms)}
            rhs = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
        rhs = rhs.replace("...", ell)
        letters = list(dict.fromkeys("".join(terms) + rhs))
        aligned = []
        for term, t in zip(terms, ops):
            if len(term) != t.ndim:
                raise ShapeError(f"einsum term {term!r} has {len(term)} letters for an operand of shape {fmt(t.shape)}")
            while len(set(term)) < len(term):  # a repeated letter: the diagonal of its two axes
                c = next(c for c in term if term.count(c) > 1)
                i, j = term.index(c), term.index(c, term.index(c) + 1)
                t = t.diagonal(0, i, j)
                term = term[:i] + term[i + 1:j] + term[j + 1:] + c
            order = sorted(range(len(term)), key=lambda k: letters.index(term[k]))
            t = t.permute(order)
            present = [term[k] for k in order]
            aligned.append(t.reshape(*(t.shape[present.index(c)] if c in present else 1 for c in letters)))
        out = aligned[0]
        for t in aligned[1:]:
            out = out.mul(t)
        summed = tuple(k for k, c in enumerate(letters) if c not in rhs)
        out = out.sum(summed) if summed else out
        kept = [c for c in letters if c in rhs]
        return out.permute([kept.index(c) for c in rhs]) if kept else out

    def interpolate(self: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                    align_corners: bool | None = None) -> Tensor:
        """Resize the spatial axes (all after (N, C)) as torch.nn.functional.interpolate: mode "nearest" (source
        index floor(o·scale)), "nearest-exact" (floor((o + 0.5)·scale), torch's and tinygrad's), or separable
        linear interpolation: "bilinear" over 2 and "trilinear" over 3 spatial dims as torch, "linear" over any
        number (torch takes 1 only; tinygrad's linear is N-d), align_corners mapping the corner pixels' centres
        onto each other. scale is in/out, or 1/scale_factor where that is given (torch's, without
        recompute_scale_factor)."""
        nd = self.ndim - 2
        if nd < 1:
            raise ShapeError(f"interpolate needs an (N, C, *spatial) input, got {fmt(self.shape)}")
        if (size is None) == (scale_factor is None):
            raise ArgumentError("interpolate takes size or scale_factor, one of them")
        ins = concrete(self.shape[2:])
        if size is not None:
            outs = _tuple(size, nd, "size")
            ratios = [i / o for i, o in zip(ins, outs)]
        else:
            sf = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
            if len(sf) != nd or not all(isinstance(f, (int, float)) and f > 0 for f in sf):
                raise ShapeError(f"scale_factor must be a number > 0 or {nd} of them, got {scale_factor!r}")
            outs = tuple(math.floor(i * f) for i, f in zip(ins, sf))
            ratios = [1 / f for f in sf]
        dims = {"nearest": None, "nearest-exact": None, "linear": None, "bilinear": 2, "trilinear": 3}
        if mode not in dims or dims[mode] not in (None, nd):
            raise ArgumentError(f"interpolate mode {mode!r} does not fit {nd} spatial dims (nearest, nearest-exact "
                                "and linear for any, bilinear for 2, trilinear for 3)")
        nearest = mode.startswith("nearest")
        if nearest and align_corners is not None:
            raise ArgumentError("align_corners is for the linear modes only")
        import numpy as np
        x = self if nearest else self._float()
        for ax, i, o, ratio in zip(range(2, 2 + nd), ins, outs, ratios):
            if nearest:
                src = (np.arange(o) + (0.5 if mode == "nearest-exact" else 0.0)) * ratio
                x = x.gather(np.minimum(np.floor(src).astype(np.int64), i - 1), ax)
                continue
            if align_corners:
                src = np.arange(o) * ((i - 1) / (o - 1) if o > 1 else 0.0)
            else:
                src = np.maximum((np.arange(o) + 0.5) * ratio - 0.5, 0)
            lo = np.minimum(np.floor(src).astype(np.int64), i - 1)
            hi = np.minimum(lo + 1, i - 1)
            w = type(self)((src - lo).astype(dtypes.to_numpy(x.dtype)), device=self.device)
            w = w.reshape(o, *(1,) * (x.ndim - ax - 1))
            x = x.gather(lo, ax).mul(w.sub(1, reverse=True)).add(x.gather(hi, ax).mul(w))
        return x
