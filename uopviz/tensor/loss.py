"""Losses: cross_entropy (with label smoothing and ignore_index), nll_loss, binary_crossentropy and its logits
form, sparse_categorical_crossentropy, each with PyTorch's meaning and its reduction ("mean", "sum", "none").

Class-index targets become one-hot masks against an arange (SPEC's gather composition), so a loss is one
elementwise product and reductions, and its gradient is the same again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uopviz.dtype import DTypeError
from uopviz.tensor.template import templated
from uopviz.tensor.util import ShapeError, fmt, int_dim

if TYPE_CHECKING:
    from uopviz.tensor.tensor import Tensor


def _reduce(loss: Tensor, reduction: str, count: Tensor | None = None) -> Tensor:
    """The per-element loss reduced; `count` divides a "mean" instead of the number of elements."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean() if count is None else loss.sum().div(count)
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


class LossMixin:
    """Loss functions of Tensor (self: the prediction)."""

    __slots__ = ()

    def _class_mask(self: Tensor, target: Tensor, ignore_index: int) -> tuple[Tensor, Tensor]:
        """For (N, C, *d) scores and (N, *d) class indices: the one-hot target (N, C, *d) and where the target
        counts (N, *d), with index checks on shapes and dtypes."""
        if not target.dtype.is_int:
            raise DTypeError(f"class-index targets must be ints, got {target.dtype.name}")
        if self.ndim < 1 or target.shape != (self.shape[:1] + self.shape[2:] if self.ndim > 1 else ()):
            raise ShapeError(f"scores of shape {fmt(self.shape)} (N, C, ...) need targets of shape (N, ...), got "
                             f"{fmt(target.shape)}")
        c = self.shape[1] if self.ndim > 1 else self.shape[0]
        axis = 1 if self.ndim > 1 else 0
        classes = type(self).arange(c, dtype=target.dtype, device=self.device)
        classes = classes.reshape(c, *(1,) * (self.ndim - 1 - axis))
        return target.unsqueeze(axis).eq(classes), target.ne(ignore_index)

    def nll_loss(self: Tensor, target: Any, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> Tensor:
        """−log_probs[target] (self: (N, C, *d) or (C,) log-probabilities), weighted per class; a "mean" divides by
        the summed weights of the counted targets, as PyTorch."""
        target = self._coerce(target)
        hot, counted = self._class_mask(target, ignore_index)
        axis = 1 if self.ndim > 1 else 0
        w = hot.cast(self.dtype)
        if weight is not None:
            w = w.mul(weight.reshape(-1, *(1,) * (self.ndim - 1 - axis)))
        picked = w.mul(self).sum(axis).neg().mul(counted)
        return _reduce(picked, reduction, w.sum(axis).mul(counted).sum() if reduction == "mean" else None)

    @templated
    def cross_entropy(self: Tensor, target: Any, weight: Tensor | None = None, ignore_index: int = -100,
                      reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
        """PyTorch's cross_entropy of (N, C, *d) (or (C,)) logits: with int class targets (N, *d), −Σ_c q_c·log
        softmax(x)_c with q the one-hot target smoothed to (1 − ε)·onehot + ε/C; with float targets (self's
        shape), class probabilities used as q (smoothed the same way)."""
        if not 0 <= label_smoothing <= 1:
            raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
        target = self._coerce(target)
        axis = 1 if self.ndim > 1 else 0
        logp = self.log_softmax(axis)
        c = self.shape[axis]
        if target.dtype.is_float:
            if target.shape != self.shape:
                raise ShapeError(f"probability targets must have the logits' shape {fmt(self.shape)}, got "
                                 f"{fmt(target.shape)}")
            share = label_smoothing / int_dim(c, "cross_entropy with probability targets")
            q = target.mul(1 - label_smoothing).add(share)
            return _reduce(q.mul(logp).sum(axis).neg(), reduction)
        nll = logp.nll_loss(target, weight, ignore_index, reduction)
        if label_smoothing == 0:
            return nll
        _, counted = self._class_mask(target, ignore_index)
        w = logp._const_like(1.0) if weight is None else weight.reshape(-1, *(1,) * (self.ndim - 1 - axis))
        smooth = logp.mul(w).sum(axis).neg().div(c).mul(counted)
        count = None
        if reduction == "mean":
            hot, _ = self._class_mask(target, ignore_index)
            count = hot.cast(self.dtype).mul(w).sum(axis).mul(counted).sum() if weight is not None else \
                counted.cast(self.dtype).sum()
        return nll.mul(1 - label_smoothing).add(_reduce(smooth, reduction, count).mul(label_smoothing))

    def sparse_categorical_crossentropy(self: Tensor, target: Any, ignore_index: int = -1,
                                        label_smoothing: float = 0.0, reduction: str = "mean") -> Tensor:
        """cross_entropy with the classes on the last axis (tinygrad's and Keras's layout): (..., C) scores, (...)
        targets."""
        x = self.permute(0, self.ndim - 1, *range(1, self.ndim - 1)) if self.ndim > 2 else self
        return x.cross_entropy(target, ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing)

    def binary_crossentropy(self: Tensor, target: Any, reduction: str = "mean") -> Tensor:
        """−(y·log p + (1 − y)·log(1 − p)) for probabilities p, each log clamped at −100 as PyTorch's BCELoss."""
        y = self._coerce(target)
        p = self._float()
        loss = y.mul(p.log().maximum(-100)).add(y.sub(1, reverse=True).mul(p.sub(1, reverse=True).log().maximum(-100)))
        return _reduce(loss.neg(), reduction)

    def binary_crossentropy_logits(self: Tensor, target: Any, reduction: str = "mean",
                                   pos_weight: Tensor | None = None) -> Tensor:
        """binary_crossentropy of sigmoid(x), computed stably as (1 − y)·x + (1 + (w − 1)·y)·softplus(−x), w the
        positive class weight (1 by default)."""
        y = self._coerce(target)
        x = self._float()
        scale = y.mul(pos_weight.sub(1)).add(1) if pos_weight is not None else x._const_like(1.0)
        return _reduce(y.sub(1, reverse=True).mul(x).add(scale.mul(x.neg().softplus(threshold=1e30))), reduction)
