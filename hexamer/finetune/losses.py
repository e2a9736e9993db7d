"""Training losses of the fine-tuning heads, with per-row and per-class weights.

Regression: ``mse``, ``huber``, and ``pearson_huber`` = ``1 - mean Pearson r + lambda * Huber``
(Pearson over the batch, per target: the objective of the Malinois / DeepSTARR style models,
which rewards getting the ranking right as well as the scale). Classification: ``ce`` (softmax
cross-entropy over the logits, binary included: two logits) and ``bce`` (a sigmoid per label,
multilabel). Row weights scale each row's loss and the mean is taken over the weights, so a
weight of 2 counts as the row twice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hexamer.finetune.options import LOSSES
from hexamer.finetune.task import TaskSpec

__all__ = ["check_loss", "compute_loss", "default_loss", "outputs_of"]

_FOR_KIND = {
    "regression": ("mse", "huber", "pearson_huber"),
    "binary": ("ce",),
    "multiclass": ("ce",),
    "multilabel": ("bce",),
}


def default_loss(task: TaskSpec) -> str:
    """``mse`` for regression, ``ce`` for binary / multiclass, ``bce`` for multilabel."""
    return _FOR_KIND[task.kind][0]


def check_loss(loss: str, task: TaskSpec) -> None:
    """Refuse a loss that does not fit the task's kind."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if loss not in _FOR_KIND[task.kind]:
        raise ValueError(f"a {task.kind} task trains with {' or '.join(_FOR_KIND[task.kind])}, not {loss!r}")


def _weighted_mean(per_row: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    if weights is None:
        return per_row.mean()
    return (per_row * weights).sum() / weights.sum().clamp(min=1e-12)


def _pearson(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean over targets of the Pearson r over the batch (0 for a batch of one row)."""
    if pred.shape[0] < 2:
        return pred.sum() * 0.0
    p = pred - pred.mean(0)
    t = target - target.mean(0)
    r = (p * t).sum(0) / (p.norm(dim=0) * t.norm(dim=0)).clamp(min=1e-8)
    return r.mean()


def compute_loss(
    loss: str,
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    weights: torch.Tensor | None = None,
    class_weights: torch.Tensor | None = None,
    huber_delta: float = 1.0,
    pearson_lambda: float = 1.0,
) -> torch.Tensor:
    """The scalar loss of float32 ``logits`` ``(B, num_labels)`` against ``labels``.

    ``labels``: float ``(B, num_labels)`` for regression / ``bce``, int64 ``(B,)`` class indices
    for ``ce``. ``class_weights``: per class for ``ce`` (a row counts ``class_weights[y]``),
    the positive-class weight per label for ``bce``.
    """
    if loss == "ce":
        per_row = F.cross_entropy(logits, labels, reduction="none")
        if class_weights is not None:
            w = class_weights[labels]
            weights = w if weights is None else weights * w
        return _weighted_mean(per_row, weights)
    if loss == "bce":
        per = F.binary_cross_entropy_with_logits(logits, labels, reduction="none", pos_weight=class_weights)
        return _weighted_mean(per.mean(-1), weights)
    if loss == "mse":
        return _weighted_mean((logits - labels).pow(2).mean(-1), weights)
    huber = _weighted_mean(
        F.huber_loss(logits, labels, reduction="none", delta=huber_delta).mean(-1), weights
    )
    if loss == "huber":
        return huber
    if loss == "pearson_huber":
        return 1.0 - _pearson(logits, labels) + pearson_lambda * huber
    raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")


def outputs_of(task: TaskSpec, logits: torch.Tensor) -> torch.Tensor:
    """Model-scale outputs: regression values, softmax probabilities (binary / multiclass), or a
    sigmoid probability per label (multilabel)."""
    if task.kind in ("binary", "multiclass"):
        return logits.softmax(-1)
    if task.kind == "multilabel":
        return logits.sigmoid()
    return logits
