"""Metrics of a fine-tuned model (or the k-mer baseline) on one split, for ``metrics.json``.

Regression: per-target Pearson, Spearman (average ranks for ties) and R² (1 − SS_res / SS_tot, as
scikit-learn's ``r2_score``), and their means over targets. Classification: AUROC, AUPRC (average
precision, as scikit-learn's ``average_precision_score``), MCC, accuracy and F1 —

* binary: of the positive class (class index 1); predictions are the argmax of the two outputs;
* multiclass: MCC and accuracy over all rows; AUROC one-vs-rest, AUPRC and F1 per class and their
  unweighted (macro) means; macro F1 counts the classes seen in the labels or the predictions, as
  ``f1_score(average="macro")`` does;
* multilabel: every metric per label (threshold 0.5 on the sigmoid) and its macro mean, plus
  ``subset_accuracy`` (every label of a row right).

A metric that is undefined on the rows given (constant predictions or labels, one class only, fewer
than two rows, NaN/inf predictions of a diverged model) is ``None`` and its reason is in ``undefined`` under the same key; it is never NaN
passed on as a number, and a mean over targets or classes is ``None`` when one of its parts is.
Rows outside ``mask`` (a :class:`LabelledSet`'s ``metric_mask``) are left out and counted in
``excluded``. Every value is equal to scipy's / scikit-learn's on the same rows (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hexamer.evals.metrics import auroc as _auroc_nan
from hexamer.evals.metrics import average_precision as _ap_nan
from hexamer.finetune.task import TaskSpec

__all__ = [
    "REGRESSION_METRICS",
    "SELECTION_METRIC",
    "classification_metrics",
    "evaluate",
    "metric_for",
    "probabilities",
    "regression_metrics",
]

REGRESSION_METRICS = ("pearson", "spearman", "r2")
_CLASS_METRICS = ("auroc", "auprc", "mcc", "accuracy", "f1")

Metrics = dict[str, Any]


# --------------------------------------------------------------------------- small maths


def _rank(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank), as ``scipy.stats.rankdata``."""
    sorter = np.argsort(x, kind="mergesort")
    inv = np.empty(sorter.size, dtype=np.intp)
    inv[sorter] = np.arange(sorter.size)
    xs = x[sorter]
    obs = np.r_[True, xs[1:] != xs[:-1]]
    dense = np.cumsum(obs)[inv]
    count = np.r_[np.nonzero(obs)[0], len(obs)]
    return 0.5 * (count[dense] + count[dense - 1] + 1)


def _pearson(a: np.ndarray, b: np.ndarray) -> tuple[float | None, str | None]:
    if a.size < 2:
        return None, f"{a.size} row(s): needs at least 2"
    if np.ptp(a) == 0:
        return None, "constant labels"
    if np.ptp(b) == 0:
        return None, "constant predictions"
    da, db = a - a.mean(), b - b.mean()
    r = float(np.dot(da, db) / np.sqrt(np.dot(da, da) * np.dot(db, db)))
    return max(-1.0, min(1.0, r)), None


def _r2(y: np.ndarray, p: np.ndarray) -> tuple[float | None, str | None]:
    if y.size < 2:
        return None, f"{y.size} row(s): needs at least 2"
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0:
        return None, "constant labels"
    return 1.0 - float(np.sum((y - p) ** 2)) / ss_tot, None


class _Collector:
    """Values with ``None`` for undefined ones, and the reasons under the same dotted key."""

    def __init__(self) -> None:
        self.undefined: dict[str, str] = {}

    def put(self, key: str, result: tuple[float | None, str | None]) -> float | None:
        value, reason = result
        if value is None:
            self.undefined[key] = reason or "undefined"
        return value

    def mean(self, key: str, values: dict[str, float | None]) -> float | None:
        missing = [name for name, v in values.items() if v is None]
        if missing:
            self.undefined[key] = f"undefined for {', '.join(map(repr, missing))}"
            return None
        if not values:
            self.undefined[key] = "no targets"
            return None
        return float(np.mean(list(values.values())))


def _rows(mask: np.ndarray | None, n: int) -> np.ndarray:
    if mask is None:
        return np.ones(n, dtype=bool)
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (n,):
        raise ValueError(f"metric mask has shape {mask.shape}, expected ({n},)")
    return mask


def _as_2d(a: Any, name: str, *, finite: bool = True) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {arr.shape}")
    if finite and not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or inf")
    return arr


# --------------------------------------------------------------------------- regression


def regression_metrics(
    y_true: Any, y_pred: Any, names: Sequence[str] | None = None, *, mask: np.ndarray | None = None
) -> Metrics:
    """Per-target Pearson, Spearman and R², and their means (top-level ``pearson`` etc.)."""
    y, p = _as_2d(y_true, "labels"), _as_2d(y_pred, "predictions", finite=False)
    if y.shape != p.shape:
        raise ValueError(f"labels have shape {y.shape}, predictions {p.shape}")
    names = list(names) if names is not None else [f"target_{i}" for i in range(y.shape[1])]
    if len(names) != y.shape[1]:
        raise ValueError(f"{len(names)} target names for {y.shape[1]} targets")
    keep = _rows(mask, y.shape[0])
    y, p = y[keep], p[keep]
    c = _Collector()
    per: dict[str, dict[str, float | None]] = {}
    for j, name in enumerate(names):
        a, b = y[:, j], p[:, j]
        bad = int((~np.isfinite(b)).sum())
        if bad:  # a diverged model: every metric of the target is undefined, the run goes on
            results = [(None, f"{bad} prediction(s) are NaN or inf")] * 3
        else:
            spear = _pearson(_rank(a), _rank(b)) if a.size >= 2 else _pearson(a, b)
            results = [_pearson(a, b), spear, _r2(a, b)]
        per[name] = {
            m: c.put(f"per_target.{name}.{m}", r) for m, r in zip(REGRESSION_METRICS, results, strict=True)
        }
    out: Metrics = {"n": int(keep.sum()), "excluded": int((~keep).sum())}
    for m in REGRESSION_METRICS:
        out[m] = c.mean(m, {name: per[name][m] for name in names})
    out["per_target"] = per
    out["undefined"] = c.undefined
    return out


# --------------------------------------------------------------------------- classification


def probabilities(kind: str, outputs: Any) -> np.ndarray:
    """Model outputs (logits) -> probabilities: softmax over classes for binary/multiclass (two
    columns for binary), the sigmoid of each output for multilabel."""
    z = np.asarray(outputs, dtype=np.float64)
    if kind == "multilabel":
        return 1.0 / (1.0 + np.exp(-z))
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"no probabilities for task kind {kind!r}")
    if z.ndim != 2:
        raise ValueError(f"{kind} outputs must be (rows, classes), got shape {z.shape}")
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _mcc(t: np.ndarray, p: np.ndarray, n_classes: int) -> tuple[float | None, str | None]:
    """Matthews correlation from the confusion matrix (Gorodkin's multiclass form, as sklearn)."""
    if t.size == 0:
        return None, "no rows"
    cm = np.zeros((n_classes, n_classes), dtype=np.float64)
    np.add.at(cm, (t, p), 1)
    t_sum, p_sum = cm.sum(axis=1), cm.sum(axis=0)
    n, correct = cm.sum(), np.trace(cm)
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ytyt == 0:
        return None, "one class only in the labels"
    if cov_ypyp == 0:
        return None, "constant predictions (one class predicted for every row)"
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp)), None


def _f1(t: np.ndarray, p: np.ndarray) -> tuple[float | None, str | None]:
    tp = float(np.sum(t & p))
    denom = 2 * tp + float(np.sum(~t & p)) + float(np.sum(t & ~p))
    if denom == 0:
        return None, "no positive label and no positive prediction"
    return 2 * tp / denom, None


def _nan_to_none(value: float, reason: str) -> tuple[float | None, str | None]:
    return (None, reason) if not np.isfinite(value) else (float(value), None)


def _auc_pair(t: np.ndarray, s: np.ndarray) -> tuple[tuple[float | None, str | None], ...]:
    if t.size == 0 or t.all() or not t.any():
        reason = "one class only in the labels"
        return (None, reason), (None, reason)
    return _nan_to_none(_auroc_nan(t, s), "undefined"), _nan_to_none(_ap_nan(t, s), "undefined")


def _binary(t: np.ndarray, prob: np.ndarray, c: _Collector) -> Metrics:
    pred = prob.argmax(axis=1)
    au, ap = _auc_pair(t == 1, prob[:, 1])
    return {
        "auroc": c.put("auroc", au),
        "auprc": c.put("auprc", ap),
        "mcc": c.put("mcc", _mcc(t, pred, 2)),
        "accuracy": float(np.mean(pred == t)) if t.size else c.put("accuracy", (None, "no rows")),
        "f1": c.put("f1", _f1(t == 1, pred == 1)),
    }


def _multiclass(t: np.ndarray, prob: np.ndarray, names: Sequence[str], c: _Collector) -> Metrics:
    pred = prob.argmax(axis=1)
    per: dict[str, dict[str, float | None]] = {}
    f1_seen: dict[str, float | None] = {}
    for k, name in enumerate(names):
        au, ap = _auc_pair(t == k, prob[:, k])
        f1 = c.put(f"per_class.{name}.f1", _f1(t == k, pred == k))
        per[name] = {
            "auroc": c.put(f"per_class.{name}.auroc", au),
            "auprc": c.put(f"per_class.{name}.auprc", ap),
        }
        per[name]["f1"] = f1
        if f1 is not None:
            f1_seen[name] = f1
    return {
        "auroc": c.mean("auroc", {n: per[n]["auroc"] for n in names}),
        "auprc": c.mean("auprc", {n: per[n]["auprc"] for n in names}),
        "mcc": c.put("mcc", _mcc(t, pred, len(names))),
        "accuracy": float(np.mean(pred == t)) if t.size else c.put("accuracy", (None, "no rows")),
        "f1": c.mean("f1", f1_seen),
        "per_class": per,
    }


def _multilabel(t: np.ndarray, prob: np.ndarray, names: Sequence[str], c: _Collector) -> Metrics:
    pred = prob > 0.5
    per: dict[str, dict[str, float | None]] = {}
    for k, name in enumerate(names):
        tk, pk = t[:, k], pred[:, k]
        au, ap = _auc_pair(tk, prob[:, k])
        acc = (float(np.mean(tk == pk)), None) if tk.size else (None, "no rows")
        per[name] = {
            "auroc": c.put(f"per_class.{name}.auroc", au),
            "auprc": c.put(f"per_class.{name}.auprc", ap),
            "mcc": c.put(f"per_class.{name}.mcc", _mcc(tk.astype(int), pk.astype(int), 2)),
            "accuracy": c.put(f"per_class.{name}.accuracy", acc),
            "f1": c.put(f"per_class.{name}.f1", _f1(tk, pk)),
        }
    out: Metrics = {m: c.mean(m, {n: per[n][m] for n in names}) for m in _CLASS_METRICS}
    subset = (float(np.mean((t == pred).all(axis=1))), None) if t.size else (None, "no rows")
    out["subset_accuracy"] = c.put("subset_accuracy", subset)
    out["per_class"] = per
    return out


def classification_metrics(
    kind: str, y_true: Any, probs: Any, names: Sequence[str], *, mask: np.ndarray | None = None
) -> Metrics:
    """AUROC, AUPRC, MCC, accuracy and F1 (see the module text) from class probabilities.

    ``y_true``: class indices ``(n,)`` for binary/multiclass, 0/1 ``(n, labels)`` for multilabel;
    ``probs``: ``(n, classes)`` (binary: two columns) or ``(n, labels)``; ``names``: the class or
    label names, in output order.
    """
    prob = np.asarray(probs, dtype=np.float64)
    n_out = 2 if kind == "binary" else len(names)
    if prob.ndim != 2 or prob.shape[1] != n_out:
        raise ValueError(f"{kind} probabilities must have shape (rows, {n_out}), got {prob.shape}")
    keep = _rows(mask, prob.shape[0])
    c = _Collector()
    bad = int((~np.isfinite(prob[keep])).any(axis=1).sum())
    if bad:  # a diverged model: every metric is undefined, the run goes on
        out = _undefined(kind, names, f"{bad} row(s) of predictions are NaN or inf", c)
    elif kind == "multilabel":
        t = np.asarray(y_true, dtype=np.float64)
        if t.shape != prob.shape:
            raise ValueError(f"multilabel labels have shape {t.shape}, probabilities {prob.shape}")
        out = _multilabel(t[keep] > 0.5, prob[keep], names, c)
    elif kind in ("binary", "multiclass"):
        t = np.asarray(y_true).astype(np.int64).reshape(-1)
        if t.shape[0] != prob.shape[0] or (t.size and (t.min() < 0 or t.max() >= n_out)):
            raise ValueError(f"{kind} labels must be {prob.shape[0]} class indices in 0..{n_out - 1}")
        t, prob = t[keep], prob[keep]
        out = _binary(t, prob, c) if kind == "binary" else _multiclass(t, prob, names, c)
    else:
        raise ValueError(f"unknown classification kind {kind!r}")
    return {"n": int(keep.sum()), "excluded": int((~keep).sum()), **out, "undefined": c.undefined}


def _undefined(kind: str, names: Sequence[str], reason: str, c: _Collector) -> Metrics:
    keys = [*_CLASS_METRICS, "subset_accuracy"] if kind == "multilabel" else list(_CLASS_METRICS)
    out: Metrics = {k: c.put(k, (None, reason)) for k in keys}
    if kind != "binary":
        out["per_class"] = {name: dict.fromkeys(("auroc", "auprc", "f1")) for name in names}
    return out


# --------------------------------------------------------------------------- by task


def evaluate(task: TaskSpec, y_true: Any, outputs: Any, *, mask: np.ndarray | None = None) -> Metrics:
    """Every metric of ``task`` (a :class:`~hexamer.finetune.task.TaskSpec`) from model outputs:
    predictions for regression (any common scale), class probabilities for classification — what
    :func:`hexamer.finetune.predict.predict` returns (:func:`probabilities` turns logits into them)."""
    if task.kind == "regression":
        return regression_metrics(y_true, outputs, task.label_columns, mask=mask)
    return classification_metrics(task.kind, y_true, outputs, task.output_names, mask=mask)


#: The metric that picks the best checkpoint, per task kind (see :func:`metric_for`).
SELECTION_METRIC = {"regression": "pearson", "binary": "mcc", "multiclass": "mcc", "multilabel": "auroc"}


def metric_for(
    task: TaskSpec, *, mask: np.ndarray | None = None
) -> tuple[Callable[[np.ndarray, np.ndarray], float], bool]:
    """``(metric, higher_is_better)`` for picking the best checkpoint on the validation set.

    Regression: mean Pearson over targets (the published recipes' headline number; insensitive to
    the label z-scoring, so model-scale outputs can be passed). Binary and multiclass: MCC, the
    NT-benchmark's reported metric, one number that stays honest on unbalanced classes. Multilabel:
    macro AUROC, threshold-free, so rare labels that a 0.5 threshold never predicts still count.
    The callable takes ``(labels, outputs)`` (outputs as :func:`evaluate` takes them) and returns a
    float, NaN when the metric is undefined on those rows (e.g. constant predictions early in
    training): :func:`~hexamer.finetune.fit.fit` counts NaN as never better and records it as
    ``None``; reports use :func:`evaluate`, whose undefined values are ``None`` with a reason.
    ``mask`` selects rows (``fit`` applies the validation set's ``metric_mask`` itself before the
    call, so leave it out there).
    """
    key = SELECTION_METRIC[task.kind]

    def metric(y_true: np.ndarray, outputs: np.ndarray) -> float:
        value = evaluate(task, y_true, outputs, mask=mask)[key]
        return float("nan") if value is None else float(value)

    metric.__name__ = key
    return metric, True
