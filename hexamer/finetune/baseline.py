"""The k-mer baseline every fine-tuning report carries, on the same split as the model.

Features: counts of the overlapping k-mers of each sequence (``A``/``C``/``G``/``T`` only; a k-mer
touching ``N`` is not counted), scaled to unit variance per k-mer on the training rows (no centring,
so the matrix stays sparse; the unpenalised intercept makes this the same fit as full
standardisation). Model: ridge regression on z-scored labels (regression), logistic regression
(binary, multiclass; one per label for multilabel), scikit-learn. ``k`` (1..6) and the penalty are
chosen on the validation set by the same metric that picks the model's best checkpoint
(:func:`hexamer.finetune.metrics.metric_for`); with no validation rows a seeded 10% of the training
rows is held out for the choice. The chosen model is then refitted on all training rows.

Simple baselines are strong on many DNA tasks (a 4-mer ridge reaches Pearson 0.85 on a planted-motif
task where a plain full fine-tune of a small model reached 0.40), so a user must see both numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hexamer.finetune.metrics import SELECTION_METRIC, evaluate
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.finetune.transform import LabelTransform

__all__ = ["DEFAULT_ALPHAS", "DEFAULT_CS", "BaselineResult", "kmer_counts", "run_baseline"]

#: ridge penalties tried (on z-scored labels and unit-variance counts)
DEFAULT_ALPHAS: tuple[float, ...] = (10.0, 100.0, 1000.0, 10000.0)
#: inverse logistic penalties tried
DEFAULT_CS: tuple[float, ...] = (0.001, 0.01, 0.1, 1.0)

_CODE = np.full(256, -1, dtype=np.int64)
for _i, _b in enumerate("ACGT"):
    _CODE[ord(_b)] = _i


def kmer_counts(sequences: Sequence[str], k: int) -> Any:
    """``(rows, 4**k)`` sparse CSR float32 counts of overlapping k-mers (index: A=0, C=1, G=2,
    T=3, first base most significant); k-mers holding anything but A/C/G/T are skipped."""
    from scipy import sparse

    if not (1 <= k <= 8):
        raise ValueError(f"k must be in 1..8, got {k}")
    n = len(sequences)
    if n == 0:
        return sparse.csr_matrix((0, 4**k), dtype=np.float32)
    joined = "N".join(sequences).upper().encode("ascii", "replace")
    codes = _CODE[np.frombuffer(joined, dtype=np.uint8)]
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=n)
    owner = np.repeat(np.arange(n), lengths + 1)[: codes.size]
    if codes.size < k:
        return sparse.csr_matrix((n, 4**k), dtype=np.float32)
    m = codes.size - k + 1
    index = np.zeros(m, dtype=np.int64)
    ok = np.ones(m, dtype=bool)
    for j in range(k):  # rolling base-4 number of each window; a window touching N is dropped
        part = codes[j : j + m]
        index = index * 4 + part
        ok &= part >= 0
    index = index[ok]
    rows = owner[:m][ok]
    data = np.ones(index.size, dtype=np.float32)
    return sparse.coo_matrix((data, (rows, index)), shape=(n, 4**k)).tocsr()


def _scale(train: Any) -> np.ndarray:
    x2 = np.asarray(train.multiply(train).mean(axis=0)).ravel()
    mean = np.asarray(train.mean(axis=0)).ravel()
    sd = np.sqrt(np.maximum(x2 - mean**2, 0.0))
    return np.where(sd > 0, 1.0 / np.where(sd > 0, sd, 1.0), 0.0).astype(np.float32)


def _scaled(counts: Any, scale: np.ndarray) -> Any:
    from scipy import sparse

    return (counts @ sparse.diags(scale)).tocsr()


def _fit(task: TaskSpec, x: Any, y: np.ndarray, penalty: float, seed: int) -> Any:
    from sklearn.linear_model import LogisticRegression, Ridge

    if task.kind == "regression":
        return Ridge(alpha=penalty, random_state=seed).fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lbfgs convergence notes on tiny sets
        if task.kind == "multilabel":
            return [LogisticRegression(C=penalty, max_iter=500).fit(x, y[:, j]) for j in range(y.shape[1])]
        return LogisticRegression(C=penalty, max_iter=500).fit(x, y)


def _outputs(task: TaskSpec, model: Any, x: Any) -> np.ndarray:
    """Model outputs in the form :func:`evaluate` takes: z-scored predictions or class
    probabilities (as :func:`hexamer.finetune.predict.predict` returns them)."""
    if task.kind == "regression":
        out = model.predict(x)
        return out.reshape(x.shape[0], -1)
    if task.kind == "multilabel":
        return np.column_stack([m.predict_proba(x)[:, 1] for m in model])
    p = np.zeros((x.shape[0], task.num_labels))
    p[:, model.classes_] = model.predict_proba(x)  # a class absent from training keeps 0
    return p


@dataclass(frozen=True)
class BaselineResult:
    """The chosen ``k`` and penalty, the validation score of every candidate, and per set
    (``train``/``valid``/``test``) the model outputs and the metrics."""

    model: str
    k: int
    penalty: float
    metric: str
    selection: list[dict[str, Any]]
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "k": self.k,
            "penalty": self.penalty,
            "selected_by": f"validation {self.metric}",
            "selection": self.selection,
            "metrics": self.metrics,
            "notes": list(self.notes),
        }


def _selection_sets(
    train: LabelledSet, valid: LabelledSet | None, seed: int
) -> tuple[LabelledSet, LabelledSet, str | None]:
    if valid is not None and len(valid) > 0:
        return train, valid, None
    if len(train) < 10:
        raise ValueError(f"the baseline needs validation rows or at least 10 training rows, got {len(train)}")
    perm = np.random.default_rng(seed).permutation(len(train))
    cut = max(1, len(train) // 10)
    note = f"no validation rows: k and the penalty were chosen on a seeded 10% of the training rows ({cut})"
    return train.subset(np.sort(perm[cut:])), train.subset(np.sort(perm[:cut])), note


def _model_labels(task: TaskSpec, transform: LabelTransform, data: LabelledSet) -> np.ndarray:
    return transform.forward(data.labels) if task.kind == "regression" else data.labels


def run_baseline(
    task: TaskSpec,
    train: LabelledSet,
    valid: LabelledSet | None = None,
    test: LabelledSet | None = None,
    *,
    ks: Sequence[int] = (1, 2, 3, 4, 5, 6),
    penalties: Sequence[float] | None = None,
    seed: int = 0,
) -> BaselineResult:
    """Fit the baseline (see the module text) and evaluate it on every set given. Regression
    outputs are returned on the raw label scale; classification outputs are class probabilities."""
    if not ks or any(not (1 <= k <= 6) for k in ks):
        raise ValueError(f"ks must be values in 1..6, got {list(ks)}")
    grid = tuple(penalties) if penalties else (DEFAULT_ALPHAS if task.kind == "regression" else DEFAULT_CS)
    if any(not (p > 0) for p in grid):
        raise ValueError(f"penalties must be > 0, got {list(grid)}")
    key = SELECTION_METRIC[task.kind]
    fit_set, sel_set, note = _selection_sets(train, valid, seed)
    transform = LabelTransform.fit(task, fit_set.labels)
    selection: list[dict[str, Any]] = []
    best: tuple[float, int, float] | None = None
    for k in ks:
        counts = kmer_counts(fit_set.sequences, k)
        scale = _scale(counts)
        x_fit, x_sel = _scaled(counts, scale), _scaled(kmer_counts(sel_set.sequences, k), scale)
        for p in grid:
            model = _fit(task, x_fit, _model_labels(task, transform, fit_set), p, seed)
            out = transform.inverse(_outputs(task, model, x_sel))
            value = evaluate(task, sel_set.labels, out, mask=sel_set.metric_mask)[key]
            selection.append({"k": k, "penalty": p, key: value})
            if value is not None and (best is None or value > best[0]):
                best = (value, k, p)
    notes = [note] if note else []
    if best is None:
        best = (float("nan"), ks[0], grid[0])
        notes.append(f"validation {key} undefined for every candidate: k={ks[0]}, penalty={grid[0]} kept")
    _, k, p = best
    transform = LabelTransform.fit(task, train.labels)
    counts = kmer_counts(train.sequences, k)
    scale = _scale(counts)
    model = _fit(task, _scaled(counts, scale), _model_labels(task, transform, train), p, seed)
    outputs: dict[str, np.ndarray] = {}
    metrics: dict[str, dict[str, Any]] = {}
    for name, data in (("train", train), ("valid", valid), ("test", test)):
        if data is None or len(data) == 0:
            continue
        out = transform.inverse(_outputs(task, model, _scaled(kmer_counts(data.sequences, k), scale)))
        metrics[name] = evaluate(task, data.labels, out, mask=data.metric_mask)
        outputs[name] = out
    kind = "ridge" if task.kind == "regression" else "logistic"
    return BaselineResult(
        f"{kind} regression on standardised {k}-mer counts",
        k,
        p,
        key,
        selection,
        outputs,
        metrics,
        tuple(notes),
    )
