"""Figures for score tables: distributions per group, ROC and precision-recall curves.

Figures are drawn on ``matplotlib.figure.Figure`` objects with the non-interactive Agg canvas
(no pyplot, no display, no global backend switch), saved in the format named by the extension
(``.png``, ``.svg``, ``.pdf``) and written atomically. Missing scores (None/NaN) are left out and
counted in the legend. ROC/PR use scikit-learn's ``roc_curve``, ``precision_recall_curve``,
``roc_auc_score`` and ``average_precision_score``; label 1 is the positive class (e.g.
pathogenic). Pass scores oriented so that larger means "more likely positive" (for the window
recipe that is ``-score``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hexamer.io import atomic_path

__all__ = ["FIGURE_FORMATS", "plot_pr", "plot_roc", "plot_score_hist"]

PathLike = str | os.PathLike[str]
FIGURE_FORMATS = ("png", "svg", "pdf")
Scores = Sequence[float | None] | np.ndarray


def _format(path: PathLike) -> str:
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        raise ValueError(
            f"{os.fspath(path)!r}: figures are written as {', '.join('.' + f for f in FIGURE_FORMATS)}"
        )
    return ext


def _floats(values: Scores) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _figure(width: float = 6.0, height: float = 4.5) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: PathLike) -> None:
    fmt = _format(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=150)


def plot_score_hist(
    path: PathLike,
    scores: Scores,
    groups: Sequence[Any] | None = None,
    *,
    bins: int = 50,
    title: str | None = None,
    xlabel: str = "score",
) -> dict[str, int]:
    """Histogram of ``scores``, one overlaid distribution per value of ``groups`` (a status, a
    label...). Returns the number of plotted scores per group."""
    _format(path)
    x = _floats(scores)
    keys = ["all"] * len(x) if groups is None else [str(g) for g in groups]
    if len(keys) != len(x):
        raise ValueError(f"groups has {len(keys)} values for {len(x)} scores")
    finite = x[np.isfinite(x)]
    edges = np.histogram_bin_edges(finite if finite.size else np.zeros(1), bins=bins)
    fig = _figure()
    ax = fig.add_subplot()
    counts: dict[str, int] = {}
    for key in dict.fromkeys(keys):
        values = x[np.array([k == key for k in keys])]
        ok = values[np.isfinite(values)]
        counts[key] = int(ok.size)
        missing = values.size - ok.size
        label = f"{key} (n={ok.size}" + (f", {missing} missing)" if missing else ")")
        ax.hist(ok, bins=edges, alpha=0.55, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    _save(fig, path)
    return counts


def _curve_inputs(
    scores: Scores | Mapping[str, Scores], labels: Sequence[Any]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    y = np.array([np.nan if v is None else float(v) for v in labels], dtype=np.float64)
    named = dict(scores) if isinstance(scores, Mapping) else {"score": scores}
    out = {}
    for name, values in named.items():
        x = _floats(values)
        if len(x) != len(y):
            raise ValueError(f"{name}: {len(x)} scores for {len(y)} labels")
        keep = np.isfinite(x) & np.isfinite(y)
        yy = y[keep]
        if not np.isin(yy, (0.0, 1.0)).all():
            raise ValueError(
                f"labels must be 0/1 (or True/False), found {sorted(set(yy.tolist()) - {0.0, 1.0})[:5]}"
            )
        if len(set(yy.tolist())) < 2:
            raise ValueError(f"{name}: both classes are needed for a curve, found only {set(yy.tolist())}")
        out[name] = (x[keep], yy.astype(int))
    return out


def plot_roc(
    path: PathLike, scores: Scores | Mapping[str, Scores], labels: Sequence[Any], *, title: str | None = None
) -> dict[str, float]:
    """ROC curve(s) of ``scores`` (or a mapping name -> scores) against 0/1 ``labels``; returns AUROC per name."""
    from sklearn.metrics import roc_auc_score, roc_curve

    _format(path)
    data = _curve_inputs(scores, labels)
    fig = _figure(5.0, 5.0)
    ax = fig.add_subplot()
    aucs = {}
    for name, (x, y) in data.items():
        fpr, tpr, _ = roc_curve(y, x)
        aucs[name] = float(roc_auc_score(y, x))
        ax.plot(fpr, tpr, label=f"{name} (AUROC {aucs[name]:.3f}, n={len(y)})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title or "ROC")
    ax.legend(loc="lower right", fontsize="small")
    _save(fig, path)
    return aucs


def plot_pr(
    path: PathLike, scores: Scores | Mapping[str, Scores], labels: Sequence[Any], *, title: str | None = None
) -> dict[str, float]:
    """Precision-recall curve(s); returns the average precision per name. The dashed line is the
    positive fraction (a random ranking's precision)."""
    from sklearn.metrics import average_precision_score, precision_recall_curve

    _format(path)
    data = _curve_inputs(scores, labels)
    fig = _figure(5.0, 5.0)
    ax = fig.add_subplot()
    aps = {}
    base = math.nan
    for name, (x, y) in data.items():
        precision, recall, _ = precision_recall_curve(y, x)
        aps[name] = float(average_precision_score(y, x))
        base = float(y.mean())
        ax.plot(recall, precision, label=f"{name} (AP {aps[name]:.3f}, n={len(y)})")
    ax.axhline(base, linestyle="--", color="grey", linewidth=0.8)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_title(title or "Precision-recall")
    ax.legend(loc="lower left", fontsize="small")
    _save(fig, path)
    return aps
