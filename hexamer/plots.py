"""Figures for score tables: distributions per group, ROC and precision-recall curves.

Figures are drawn on ``matplotlib.figure.Figure`` objects with the non-interactive Agg canvas
(no pyplot, no display, no global backend switch), saved in the format named by the extension
(``.png``, ``.svg``, ``.pdf``) and written atomically. Missing scores (None/NaN) are left out and
counted in the legend. ROC/PR use scikit-learn's ``roc_curve``, ``precision_recall_curve``,
``roc_auc_score`` and ``average_precision_score``; label 1 is the positive class (e.g.
pathogenic); string labels name theirs with ``positive=``. Pass scores oriented so that larger
means "more likely positive" (for the window recipe that is ``-score``). Axis labels say the unit
(log-probabilities are natural logs: nats) and which sign means what (:func:`score_axis_label`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hexamer.io import atomic_path

__all__ = [
    "FIGURE_FORMATS",
    "SCORE_MEANINGS",
    "binary_labels",
    "plot_pr",
    "plot_roc",
    "plot_score_hist",
    "plot_table",
    "score_axis_label",
]

PathLike = str | os.PathLike[str]
FIGURE_FORMATS = ("png", "svg", "pdf")
Scores = Sequence[float | None] | np.ndarray

#: what a score means, per recipe or score column: the axis label of its figures
SCORE_MEANINGS = {
    "window": "LL(alt) − LL(ref), nats  (< 0: the alt is less likely than the reference)",
    "next_base": "log P(ref) − log P(alt), nats  (> 0: the alt is less likely than the reference)",
    "mean_logprob": "mean log P(base), nats  (uniform guessing: −1.386)",
}


def score_axis_label(recipe_or_column: str | None, *, negated: bool = False) -> str:
    """The x-axis label for a score: its formula, unit and the meaning of its sign."""
    meaning = SCORE_MEANINGS.get(recipe_or_column or "", f"{recipe_or_column or 'score'}")
    return f"−({meaning.split('  (')[0]})  (larger: more likely positive)" if negated else meaning


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
    ax.set_ylabel("variants or sequences (count)")
    ax.set_title(title or "Score distribution")
    ax.legend(loc="best", fontsize="small")
    _save(fig, path)
    return counts


def binary_labels(labels: Sequence[Any], positive: Any = None) -> np.ndarray:
    """0/1 (NaN for missing) from 0/1/True/False labels, or from any labels with ``positive``
    naming the positive class (e.g. ``positive="pathogenic"``)."""
    values = list(labels)
    if positive is not None:
        present = {str(v) for v in values if v is not None}
        if str(positive) not in present:
            raise ValueError(f"no label equals {positive!r}; labels found: {sorted(present)[:10]}")
        return np.array([np.nan if v is None else float(str(v) == str(positive)) for v in values])
    try:
        return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        found = sorted({str(v) for v in values if v is not None})[:10]
        raise ValueError(
            f"labels are not 0/1: name the positive class (positive=..., --positive LABEL); found {found}"
        ) from None


def _curve_inputs(
    scores: Scores | Mapping[str, Scores], labels: Sequence[Any], positive: Any = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    y = binary_labels(labels, positive)
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


def _curve_figure(
    path: PathLike, scores: Scores | Mapping[str, Scores], labels: Sequence[Any], positive: Any
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], Any, Any]:
    """The checked curve inputs and a square figure with one axes (ROC and PR share this set-up)."""
    _format(path)
    data = _curve_inputs(scores, labels, positive)
    fig = _figure(5.0, 5.0)
    return data, fig, fig.add_subplot()


def _finish_curve(
    fig: Any, ax: Any, path: PathLike, *, xlabel: str, ylabel: str, ytop: float, title: str, legend: str
) -> None:
    """Label a curve plot on the unit square (y up to ``ytop``), add its legend and save it."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, ytop)
    ax.set_title(title)
    ax.legend(loc=legend, fontsize="small")
    _save(fig, path)


def plot_roc(
    path: PathLike,
    scores: Scores | Mapping[str, Scores],
    labels: Sequence[Any],
    *,
    title: str | None = None,
    positive: Any = None,
) -> dict[str, float]:
    """ROC curve(s) of ``scores`` (or a mapping name -> scores) against 0/1 ``labels`` (or any
    labels with ``positive`` naming the positive class); returns AUROC per name."""
    from sklearn.metrics import roc_auc_score, roc_curve

    data, fig, ax = _curve_figure(path, scores, labels, positive)
    aucs = {}
    for name, (x, y) in data.items():
        fpr, tpr, _ = roc_curve(y, x)
        aucs[name] = float(roc_auc_score(y, x))
        ax.plot(fpr, tpr, label=f"{name} (AUROC {aucs[name]:.3f}, n={len(y)})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=0.8)
    _finish_curve(
        fig,
        ax,
        path,
        xlabel="false positive rate (1 − specificity)",
        ylabel="true positive rate (sensitivity)",
        ytop=1,
        title=title or "ROC curve",
        legend="lower right",
    )
    return aucs


def plot_pr(
    path: PathLike,
    scores: Scores | Mapping[str, Scores],
    labels: Sequence[Any],
    *,
    title: str | None = None,
    positive: Any = None,
) -> dict[str, float]:
    """Precision-recall curve(s); returns the average precision per name. The dashed line is the
    positive fraction (a random ranking's precision)."""
    from sklearn.metrics import average_precision_score, precision_recall_curve

    data, fig, ax = _curve_figure(path, scores, labels, positive)
    aps = {}
    base = math.nan
    for name, (x, y) in data.items():
        precision, recall, _ = precision_recall_curve(y, x)
        aps[name] = float(average_precision_score(y, x))
        base = float(y.mean())
        ax.plot(recall, precision, label=f"{name} (AP {aps[name]:.3f}, n={len(y)})")
    ax.axhline(base, linestyle="--", color="grey", linewidth=0.8)
    _finish_curve(
        fig,
        ax,
        path,
        xlabel="recall (sensitivity)",
        ylabel="precision (positive predictive value)",
        ytop=1.02,
        title=title or "Precision-recall curve",
        legend="lower left",
    )
    return aps


def plot_table(
    kind: str,
    data: Any,
    path: PathLike,
    *,
    score_col: str = "score",
    label_col: str | None = None,
    positive: Any = None,
    by: str | None = None,
    negate: bool = False,
    title: str | None = None,
) -> dict[str, Any]:
    """The figure of a score table (a ``pyarrow.Table``, as ``hexamer vep``/``score`` write them):
    ``kind`` hist (one distribution, or one per value of ``by``), roc or pr (against
    ``label_col``). Rows without a score are left out; ``negate`` plots ``-score``. Returns what
    was drawn: ``n`` scores and, for hist, the ``counts`` per group, else the ``metric``, its
    ``value`` and the ``positive`` label. A ``ValueError`` names a missing column or unusable labels."""
    missing = [c for c in (score_col, label_col, by) if c and c not in data.column_names]
    if missing:
        raise ValueError(f"no column {missing[0]!r}; columns: {', '.join(data.column_names)}")
    scores = np.asarray(data.column(score_col).to_pylist(), dtype=float)
    keep = ~np.isnan(scores)
    scores = -scores if negate else scores
    recipes = set(data.column("recipe").to_pylist()) if "recipe" in data.column_names else set()
    meaning = recipes.pop() if len(recipes) == 1 else score_col
    summary: dict[str, Any] = {"n": int(keep.sum())}
    if kind == "hist":
        groups = data.column(by).to_pylist() if by else None
        summary["counts"] = plot_score_hist(
            path,
            scores[keep],
            [g for g, k in zip(groups, keep, strict=True) if k] if groups else None,
            title=title or (f"{score_col} per {by}" if by else f"{score_col} distribution"),
            xlabel=score_axis_label(meaning, negated=negate),
        )
        return summary
    if label_col is None:
        raise ValueError(f"{kind} needs a label column")
    labels = [label for label, k in zip(data.column(label_col).to_pylist(), keep, strict=True) if k]
    fn, metric = (plot_roc, "AUROC") if kind == "roc" else (plot_pr, "average precision")
    what = "ROC" if kind == "roc" else "Precision-recall"
    positive_name = positive if positive is not None else "1"
    values = fn(
        path,
        {score_col if not negate else f"-{score_col}": scores[keep]},
        labels,
        title=title or f"{what}: {'-' if negate else ''}{score_col} vs {label_col} = {positive_name}",
        positive=positive,
    )
    summary.update(metric=metric, value=next(iter(values.values())), positive=positive_name)
    return summary
