"""What a fine-tuning task is: its kind, its outputs, and the labelled rows it is trained on.

`TaskSpec` names the outputs the way `transformers` does (`num_labels`, `problem_type`,
`id2label`) so a head folder's config.json reads the same in both libraries. `LabelledSet` holds
rows that the data readers already checked and normalised; it only guards shapes and dtypes, so a
wrong array fails here rather than as a silent broadcast inside a loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

__all__ = ["TASK_KINDS", "LabelledSet", "TaskKind", "TaskSpec"]

TaskKind = Literal["regression", "binary", "multiclass", "multilabel"]
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)

_PROBLEM_TYPES = {
    "regression": "regression",
    "binary": "single_label_classification",
    "multiclass": "single_label_classification",
    "multilabel": "multi_label_classification",
}


def _check_names(what: str, names: tuple[str, ...]) -> None:
    if not names:
        raise ValueError(f"{what} is empty")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{what} holds {name!r}: every name must be a non-empty string")
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"{what} repeats {', '.join(map(repr, dup))}")


@dataclass(frozen=True)
class TaskSpec:
    """A supervised task: ``kind``, the label columns read, and the output (class) names.

    regression / multilabel: one output per label column; binary / multiclass: one label column
    holding a class index. Binary has two logits trained with cross-entropy, as the published
    Nucleotide Transformer recipe and ``LlamaForSequenceClassification`` do.
    """

    kind: TaskKind
    label_columns: tuple[str, ...]
    class_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            raise ValueError(f"task kind {self.kind!r} is not one of {', '.join(TASK_KINDS)}")
        object.__setattr__(self, "label_columns", tuple(self.label_columns))
        _check_names("label_columns", self.label_columns)
        if self.class_names is not None:
            object.__setattr__(self, "class_names", tuple(self.class_names))
            _check_names("class_names", self.class_names)
        self._check_kind()

    def _check_kind(self) -> None:
        kind, cols, names = self.kind, self.label_columns, self.class_names
        if kind in ("binary", "multiclass") and len(cols) != 1:
            raise ValueError(f"a {kind} task reads one label column, got {len(cols)}: {cols}")
        if kind == "regression" and names is not None:
            raise ValueError("a regression task has no class_names (its outputs are label_columns)")
        if kind == "binary" and names is not None and len(names) != 2:
            raise ValueError(f"a binary task has 2 class_names, got {len(names)}: {names}")
        if kind == "multiclass" and (names is None or len(names) < 2):
            raise ValueError("a multiclass task needs class_names with at least 2 classes")
        if kind == "multilabel" and names is not None and len(names) != len(cols):
            raise ValueError(
                f"a multilabel task has one class name per label column: {len(names)} names "
                f"for {len(cols)} columns"
            )

    @property
    def num_labels(self) -> int:
        """Number of logits the head outputs."""
        if self.kind == "binary":
            return 2
        if self.kind == "multiclass":
            assert self.class_names is not None
            return len(self.class_names)
        return len(self.label_columns)

    @property
    def problem_type(self) -> str:
        """``transformers``' name for the loss (config.json ``problem_type``)."""
        return _PROBLEM_TYPES[self.kind]

    @property
    def output_names(self) -> tuple[str, ...]:
        """One name per logit, in order."""
        if self.class_names is not None:
            return self.class_names
        if self.kind == "binary":
            return ("0", "1")
        return self.label_columns

    def id2label(self) -> dict[int, str]:
        """Output index -> name, as config.json's ``id2label``."""
        return dict(enumerate(self.output_names))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (stored in a head folder's config.json)."""
        return {
            "kind": self.kind,
            "label_columns": list(self.label_columns),
            "class_names": None if self.class_names is None else list(self.class_names),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskSpec:
        """Inverse of :meth:`to_json`; a missing or wrong field raises ``ValueError``."""
        if not isinstance(d, dict):
            raise ValueError(f"a task must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("kind", "label_columns") if k not in d]
        if missing:
            raise ValueError(f"task JSON lacks {', '.join(missing)}")
        cols, names = d["label_columns"], d.get("class_names")
        if not isinstance(cols, list) or (names is not None and not isinstance(names, list)):
            raise ValueError("task JSON: label_columns and class_names must be lists")
        return cls(d["kind"], tuple(cols), None if names is None else tuple(names))

    def check_labels(self, labels: np.ndarray, what: str = "labels") -> None:
        """Raise ``ValueError`` unless ``labels`` has this task's dtype and shape."""
        n = len(labels)
        if self.kind in ("binary", "multiclass"):
            if labels.dtype != np.int64 or labels.shape != (n,):
                raise ValueError(
                    f"{what}: a {self.kind} task takes int64 (n,) class indices, "
                    f"got {labels.dtype} {labels.shape}"
                )
            if n and (labels.min() < 0 or labels.max() >= self.num_labels):
                raise ValueError(f"{what}: class index outside 0..{self.num_labels - 1}")
            return
        if labels.dtype != np.float32 or labels.shape != (n, self.num_labels):
            raise ValueError(
                f"{what}: a {self.kind} task takes float32 (n, {self.num_labels}), "
                f"got {labels.dtype} {labels.shape}"
            )
        if not np.isfinite(labels).all():
            raise ValueError(f"{what}: holds NaN or infinite values")
        if self.kind == "multilabel" and not np.isin(labels, (0.0, 1.0)).all():
            raise ValueError(f"{what}: a multilabel task takes 0/1 labels")


@dataclass(frozen=True, eq=False)
class LabelledSet:
    """Rows ready to train on: ids, upper-case A/C/G/T/N sequences, labels (see `TaskSpec`).

    ``weights`` scale each row's loss; ``metric_mask`` marks the rows that count in metrics
    (all when None); ``chroms`` is kept for chromosome splits and reports.
    """

    ids: tuple[str, ...]
    sequences: tuple[str, ...]
    labels: np.ndarray
    weights: np.ndarray | None = None
    chroms: tuple[str, ...] | None = None
    metric_mask: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "sequences", tuple(self.sequences))
        n = len(self.ids)
        if len(self.sequences) != n or len(self.labels) != n:
            raise ValueError(
                f"LabelledSet: {n} ids, {len(self.sequences)} sequences and "
                f"{len(self.labels)} labels; they must match"
            )
        if self.chroms is not None:
            object.__setattr__(self, "chroms", tuple(self.chroms))
            if len(self.chroms) != n:
                raise ValueError(f"LabelledSet: {len(self.chroms)} chroms for {n} rows")
        if self.weights is not None:
            w = self.weights
            if w.shape != (n,) or w.dtype != np.float32:
                raise ValueError(f"LabelledSet: weights must be float32 ({n},), got {w.dtype} {w.shape}")
            if not np.isfinite(w).all() or (w < 0).any():
                raise ValueError("LabelledSet: weights must be finite and >= 0")
        if self.metric_mask is not None:
            m = self.metric_mask
            if m.shape != (n,) or m.dtype != np.bool_:
                raise ValueError(f"LabelledSet: metric_mask must be bool ({n},), got {m.dtype} {m.shape}")

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, index: np.ndarray) -> LabelledSet:
        """The rows at ``index`` (integer positions or a boolean mask), in that order."""
        idx = np.asarray(index)
        if idx.dtype == np.bool_:
            if idx.shape != (len(self),):
                raise ValueError(f"subset: mask of shape {idx.shape} for {len(self)} rows")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        if len(idx) and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise IndexError(f"subset: index outside 0..{len(self) - 1}")

        def pick(seq: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return None if seq is None else tuple(seq[i] for i in idx)

        return LabelledSet(
            ids=tuple(self.ids[i] for i in idx),
            sequences=tuple(self.sequences[i] for i in idx),
            labels=self.labels[idx],
            weights=None if self.weights is None else self.weights[idx],
            chroms=pick(self.chroms),
            metric_mask=None if self.metric_mask is None else self.metric_mask[idx],
        )
