"""What a fine-tuning run leaves on disk besides the model: ``metrics.json``, prediction tables and
figures, every file written atomically (a killed run never leaves half a file).

Prediction table, one row per input row (train, valid and test: every row read appears once):
``id``, ``split``, ``chrom`` (when read), ``in_metrics`` (when a metric filter was given), then per
target

* regression: ``<column>_observed`` and ``<column>`` (the prediction), both on the raw label scale
  (the z-scoring undone), and ``baseline_<column>`` when the k-mer baseline ran;
* binary / multiclass: ``<column>_observed`` and ``<column>`` (class names: observed, predicted =
  most probable), then ``p_<class>`` per class (and ``baseline_p_<class>``);
* multilabel: ``<column>_observed`` (0/1) and ``<column>`` (probability; ``baseline_<column>``).

Figures (matplotlib, Agg, PNG): observed vs predicted per target for regression, ROC and
precision-recall curves for classification (one curve per class or label beyond binary), and the
loss / metric curves of a training history.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.io import atomic_path, write_table

__all__ = [
    "plot_classification_curves",
    "plot_history",
    "plot_observed_vs_predicted",
    "prediction_rows",
    "write_json",
    "write_predictions",
]

PathLike = str | os.PathLike[str]


def _clean(value: Any) -> Any:
    """JSON-ready: numpy scalars/arrays to Python; a non-finite float is an error (metrics report
    undefined values as None, so a NaN here is a bug, not a result)."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {value} in a report: undefined values must be None")
    return value


def write_json(path: PathLike, payload: Mapping[str, Any]) -> None:
    """Strict JSON (no NaN/Infinity), indented, atomically."""
    text = json.dumps(_clean(payload), indent=2, allow_nan=False) + "\n"
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def _target_columns(task: TaskSpec, labels: np.ndarray, outputs: np.ndarray, prefix: str) -> dict[str, Any]:
    cols: dict[str, Any] = {}
    if task.kind == "regression":
        for j, name in enumerate(task.label_columns):
            if not prefix:
                cols[f"{name}_observed"] = labels[:, j].astype(np.float64)
            cols[f"{prefix}{name}"] = np.asarray(outputs[:, j], dtype=np.float64)
        return cols
    prob = outputs
    if task.kind == "multilabel":
        for j, name in enumerate(task.label_columns):
            if not prefix:
                cols[f"{name}_observed"] = labels[:, j].astype(np.int64)
            cols[f"{prefix}{name}"] = prob[:, j]
        return cols
    names = np.asarray(task.output_names, dtype=object)
    col = task.label_columns[0]
    if not prefix:
        cols[f"{col}_observed"] = names[labels]
    cols[f"{prefix}{col}"] = names[prob.argmax(axis=1)]
    for k, cls in enumerate(task.output_names):
        cols[f"{prefix}p_{cls}"] = prob[:, k]
    return cols


def prediction_rows(
    task: TaskSpec,
    data: LabelledSet,
    split_names: Sequence[str],
    outputs: np.ndarray,
    baseline: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """One dict per row of ``data`` (see the module text). ``outputs``: raw-scale predictions for
    regression, class probabilities for classification (as ``predict`` returns them), aligned with
    ``data``; ``baseline`` likewise."""
    n = len(data)
    if len(split_names) != n or len(outputs) != n or (baseline is not None and len(baseline) != n):
        raise ValueError(f"{n} rows but {len(split_names)} split names / {len(outputs)} outputs")
    out = np.asarray(outputs).reshape(n, -1)
    columns: dict[str, Any] = {"id": list(data.ids), "split": list(split_names)}
    if data.chroms is not None:
        columns["chrom"] = list(data.chroms)
    if data.metric_mask is not None:
        columns["in_metrics"] = data.metric_mask.tolist()
    columns.update(_target_columns(task, data.labels, out, ""))
    if baseline is not None:
        columns.update(_target_columns(task, data.labels, np.asarray(baseline).reshape(n, -1), "baseline_"))
    plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in columns.items()}
    return [{k: plain[k][i] for k in plain} for i in range(n)]


def write_predictions(path: PathLike, rows: Sequence[Mapping[str, Any]]) -> None:
    """The prediction table (TSV, CSV, Parquet or JSONL by extension), atomically."""
    write_table(path, list(rows))


# --------------------------------------------------------------------------- figures


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: PathLike) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)


def plot_observed_vs_predicted(
    path: PathLike, names: Sequence[str], observed: np.ndarray, predicted: np.ndarray, *, title: str = ""
) -> None:
    """One scatter panel per target (raw scale), with the identity line and Pearson r in the title."""
    y, p = np.asarray(observed, np.float64), np.asarray(predicted, np.float64)
    y, p = y.reshape(len(y), -1), p.reshape(len(p), -1)
    fig = _figure(4.0 * len(names), 4.0)
    for j, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), j + 1)
        ax.scatter(y[:, j], p[:, j], s=6, alpha=0.5, linewidths=0)
        lo, hi = float(min(y[:, j].min(), p[:, j].min())), float(max(y[:, j].max(), p[:, j].max()))
        ax.plot([lo, hi], [lo, hi], linestyle="--", color="grey", linewidth=0.8)
        r = np.corrcoef(y[:, j], p[:, j])[0, 1] if len(y) > 1 and np.ptp(p[:, j]) > 0 else float("nan")
        shown = f"r = {r:.3f}" if math.isfinite(r) else "r undefined"
        ax.set_title(f"{title} {name}: {shown}, n = {len(y)}".strip(), fontsize="medium")
        ax.set_xlabel(f"observed {name}")
        ax.set_ylabel(f"predicted {name}")
    _save(fig, path)


def _curves(
    task: TaskSpec, labels: np.ndarray, outputs: np.ndarray
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per curve name: (0/1 truth, score); binary has one curve (the positive class)."""
    prob = np.asarray(outputs, dtype=np.float64)
    if task.kind == "binary":
        return {task.output_names[1]: (labels == 1, prob[:, 1])}
    if task.kind == "multilabel":
        return {name: (labels[:, j] > 0.5, prob[:, j]) for j, name in enumerate(task.output_names)}
    return {name: (labels == k, prob[:, k]) for k, name in enumerate(task.output_names)}


def plot_classification_curves(
    roc_path: PathLike, pr_path: PathLike, task: TaskSpec, labels: np.ndarray, outputs: np.ndarray
) -> None:
    """ROC and precision-recall curves (scikit-learn's points); a class with one label value in
    these rows has no curve and is named in the legend as such."""
    from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_curve

    roc, pr = _figure(5.5, 4.5), _figure(5.5, 4.5)
    ax_roc, ax_pr = roc.add_subplot(1, 1, 1), pr.add_subplot(1, 1, 1)
    for name, (t, s) in _curves(task, np.asarray(labels), np.asarray(outputs)).items():
        if t.all() or not t.any():
            ax_roc.plot([], [], label=f"{name}: one class only, no curve")
            continue
        fpr, tpr, _ = roc_curve(t, s)
        ax_roc.plot(fpr, tpr, label=f"{name} (AUROC {auc(fpr, tpr):.3f})")
        precision, recall, _ = precision_recall_curve(t, s)
        ax_pr.plot(recall, precision, label=f"{name} (AP {average_precision_score(t, s):.3f})")
    ax_roc.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8)
    ax_roc.set_xlabel("false positive rate")
    ax_roc.set_ylabel("true positive rate")
    ax_pr.set_xlabel("recall")
    ax_pr.set_ylabel("precision")
    for ax in (ax_roc, ax_pr):
        ax.legend(loc="best", fontsize="small")
    _save(roc, roc_path)
    _save(pr, pr_path)


def plot_history(path: PathLike, history: Sequence[Mapping[str, Any]], *, x: str = "step") -> None:
    """Loss curves (every numeric key with ``loss`` in its name) and metric curves (the other
    numeric keys but ``epoch``/``lr``) against ``x``; missing points are skipped."""
    keys: list[str] = []
    for rec in history:
        for k, v in rec.items():
            if k not in keys and k != x and isinstance(v, int | float) and not isinstance(v, bool):
                keys.append(k)
    losses = [k for k in keys if "loss" in k]
    others = [k for k in keys if "loss" not in k and k not in ("epoch", "lr", "learning_rate")]
    fig = _figure(10.0 if others else 5.5, 4.0)
    panels = [(losses, "loss"), (others, "metric")] if others else [(losses, "loss")]
    for i, (group, ylabel) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for k in group:
            pts = [(r[x], r[k]) for r in history if x in r and isinstance(r.get(k), int | float)]
            pts = [(a, b) for a, b in pts if math.isfinite(b)]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="." if len(pts) < 50 else None, label=k)
        ax.set_xlabel(x)
        ax.set_ylabel(ylabel)
        if group:
            ax.legend(loc="best", fontsize="small")
    _save(fig, path)
