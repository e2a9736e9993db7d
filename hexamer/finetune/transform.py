"""Label scaling fitted on the training rows only, and the duplication of high-activity rows.

Regression labels are z-scored per target (mean 0, s.d. 1 on the training set; population s.d.)
as the published DREAM / Malinois / DeepSTARR recipes do, so one learning rate suits every assay
and several targets weigh alike in the loss. The mean and s.d. come from the training rows alone
(never validation or test: that would leak), are stored in the model folder (``to_json``), and
predictions are reported on the raw scale through :meth:`LabelTransform.inverse`. Classification
labels pass through unchanged (``identity``).

:func:`duplicate_high_activity` is the recipes' option to show the rare strong enhancers more
often: training rows whose label is above a threshold are repeated.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from hexamer.finetune.task import LabelledSet, TaskSpec

__all__ = ["LabelTransform", "duplicate_high_activity"]


@dataclass(frozen=True)
class LabelTransform:
    """``zscore`` (per-target ``mean``/``std``) or ``identity``; ``columns`` names the targets."""

    kind: Literal["zscore", "identity"]
    columns: tuple[str, ...]
    mean: tuple[float, ...] = ()
    std: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("zscore", "identity"):
            raise ValueError(f"label transform kind must be 'zscore' or 'identity', got {self.kind!r}")
        if self.kind == "zscore":
            k = len(self.columns)
            if len(self.mean) != k or len(self.std) != k:
                raise ValueError(
                    f"z-score transform: {k} columns, {len(self.mean)} means, {len(self.std)} s.d."
                )
            values = (*self.mean, *self.std)
            if not all(math.isfinite(v) for v in values) or any(s <= 0 for s in self.std):
                raise ValueError("z-score transform: means must be finite and s.d. finite and > 0")

    @classmethod
    def fit(cls, task: TaskSpec, train_labels: np.ndarray) -> LabelTransform:
        """Fit on the training set's labels: z-score for regression, identity otherwise. A target
        that is constant on the training set cannot be scaled and raises ``ValueError``."""
        if task.kind != "regression":
            return cls("identity", task.output_names)
        y = np.asarray(train_labels, dtype=np.float64)
        if y.ndim != 2 or y.shape[1] != len(task.label_columns) or y.shape[0] == 0:
            raise ValueError(
                f"z-score fit: expected (rows > 0, {len(task.label_columns)}) labels, got {y.shape}"
            )
        mean, std = y.mean(axis=0), y.std(axis=0)
        flat = [c for c, s in zip(task.label_columns, std, strict=True) if not s > 0]
        if flat:
            raise ValueError(
                f"label column(s) {', '.join(map(repr, flat))} constant on the training set: "
                "nothing to learn, and z-scoring would divide by 0"
            )
        return cls("zscore", task.label_columns, tuple(map(float, mean)), tuple(map(float, std)))

    def forward(self, labels: np.ndarray) -> np.ndarray:
        """Raw labels -> model scale (float32 for z-score; unchanged for identity)."""
        if self.kind == "identity":
            return labels
        y = np.asarray(labels, dtype=np.float64)
        return ((y - np.asarray(self.mean)) / np.asarray(self.std)).astype(np.float32)

    def inverse(self, outputs: np.ndarray) -> np.ndarray:
        """Model-scale predictions -> raw scale (float64); identity returns them unchanged."""
        if self.kind == "identity":
            return outputs
        z = np.asarray(outputs, dtype=np.float64)
        return z * np.asarray(self.std) + np.asarray(self.mean)

    def apply(self, data: LabelledSet) -> LabelledSet:
        """``data`` with its labels on the model scale."""
        return dataclasses.replace(data, labels=self.forward(data.labels))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "columns": list(self.columns),
            "mean": list(self.mean),
            "std": list(self.std),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> LabelTransform:
        """Inverse of :meth:`to_json`; a missing or wrong field raises ``ValueError``."""
        if not isinstance(d, dict) or "kind" not in d or "columns" not in d:
            raise ValueError("a label transform must be a JSON object with 'kind' and 'columns'")
        try:
            mean = tuple(float(v) for v in d.get("mean", ()))
            std = tuple(float(v) for v in d.get("std", ()))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"label transform: mean/std must be lists of numbers ({exc})") from None
        return cls(d["kind"], tuple(str(c) for c in d["columns"]), mean, std)


def duplicate_high_activity(
    train: LabelledSet,
    *,
    copies: int = 1,
    quantile: float | None = 0.9,
    threshold: float | None = None,
    targets: Sequence[int] | None = None,
) -> tuple[LabelledSet, int]:
    """``train`` plus ``copies`` extra copies of every high-activity row; returns the set and the
    number of rows duplicated.

    A row is high-activity when any of ``targets`` (default: all) exceeds ``threshold`` (raw
    label scale, as Malinois' ``duplication_cutoff``) or, without one, the ``quantile`` of that
    target over the training rows. Use on the training set only (never on validation or test:
    metrics would count rows twice). Copies keep the row's labels, weight and chromosome; their ids
    get ``~dup1``, ``~dup2``, ... so ids stay unique.
    """
    if not (1 <= copies <= 100):
        raise ValueError(f"copies must be in 1..100, got {copies}")
    if (quantile is None) == (threshold is None):
        raise ValueError("give exactly one of quantile and threshold")
    if quantile is not None and not (0.0 < quantile < 1.0):
        raise ValueError(f"quantile must be in (0, 1), got {quantile}")
    y = np.asarray(train.labels)
    if y.ndim != 2 or y.dtype != np.float32:
        raise ValueError("high-activity duplication is for regression labels (float32, rows x targets)")
    cols = list(range(y.shape[1])) if targets is None else list(targets)
    if not cols or any(not (0 <= t < y.shape[1]) for t in cols):
        raise ValueError(f"targets must be indices in 0..{y.shape[1] - 1}, got {targets}")
    if len(train) == 0:
        return train, 0
    sub = y[:, cols].astype(np.float64)
    cut = np.quantile(sub, quantile, axis=0) if quantile is not None else np.full(len(cols), threshold)
    high = np.flatnonzero((sub > cut).any(axis=1))
    if high.size == 0:
        return train, 0
    index = np.concatenate([np.arange(len(train)), np.tile(high, copies)])
    out = train.subset(index)
    ids = list(train.ids) + [f"{train.ids[i]}~dup{c + 1}" for c in range(copies) for i in high]
    return dataclasses.replace(out, ids=tuple(ids)), int(high.size)
