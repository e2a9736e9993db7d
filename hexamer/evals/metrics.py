"""The published metrics, each NaN (never an exception) where it is undefined, e.g. one class only.

AUROC, AUPRC and AP are computed here with numpy from the same threshold points scikit-learn uses
(the tests check them against scikit-learn): the bootstrap recomputes them a thousand times, and
TraitGym's per-chromosome metrics dozens of times per resample, where scikit-learn's input checks
would dominate the run time.

* AUROC: the value of scikit-learn's ``roc_auc_score``.
* AUPRC: the **trapezoidal** area ``auc(recall, precision)`` of ``precision_recall_curve``, as the
  published VEP and ClinVar scripts compute it (not average precision).
* By-chromosome weighted AUROC / AUPRC (TraitGym): per chromosome holding both classes, AUROC and
  **average precision**; weighted by the chromosome's number of labelled variants, the weights
  normalised over the chromosomes kept (those with one class only are skipped).
* Spearman: ``scipy.stats.spearmanr`` (average ranks for ties, like pandas' ``corr("spearman")``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["auprc_trapezoid", "auroc", "average_precision", "by_group_weighted", "spearman"]

NAN = float("nan")


def _xy(y: Sequence[Any], score: Sequence[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    yy = np.asarray(y, dtype=np.float64)
    ss = np.asarray(score, dtype=np.float64)
    keep = np.isfinite(yy) & np.isfinite(ss)
    yy, ss = yy[keep], ss[keep]
    if yy.size == 0 or len(np.unique(yy)) < 2:
        return None
    return yy.astype(int), ss


def _curve(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative true and false positives at each distinct threshold, highest score first
    (the same points as scikit-learn's ``_binary_clf_curve``)."""
    order = np.argsort(s, kind="mergesort")[::-1]
    s, y = s[order], y[order]
    idx = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]
    tps = np.cumsum(y)[idx].astype(np.float64)
    return tps, (idx + 1) - tps


def _trapezoid(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2))


def auroc(y: Sequence[Any], score: Sequence[Any]) -> float:
    """``roc_auc_score``: the trapezoidal area under the ROC curve (ties as one threshold)."""
    xy = _xy(y, score)
    if xy is None:
        return NAN
    tps, fps = _curve(*xy)
    return _trapezoid(np.r_[0.0, tps / tps[-1]], np.r_[0.0, fps / fps[-1]])


def _pr(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Precision and recall in increasing-recall order, starting at (recall 0, precision 1), as
    ``precision_recall_curve`` returns them (reversed)."""
    tps, fps = _curve(y, s)
    precision = tps / (tps + fps)
    recall = tps / tps[-1]
    return np.r_[1.0, precision], np.r_[0.0, recall]


def auprc_trapezoid(y: Sequence[Any], score: Sequence[Any]) -> float:
    """``auc(recall, precision)`` of ``precision_recall_curve`` (the published AUPRC)."""
    xy = _xy(y, score)
    if xy is None:
        return NAN
    precision, recall = _pr(*xy)
    return _trapezoid(precision, recall)


def average_precision(y: Sequence[Any], score: Sequence[Any]) -> float:
    """``average_precision_score``: sum over thresholds of (recall step) x precision."""
    xy = _xy(y, score)
    if xy is None:
        return NAN
    precision, recall = _pr(*xy)
    return max(0.0, float(np.sum(np.diff(recall) * precision[1:])))


def by_group_weighted(y: Sequence[Any], score: Sequence[Any], groups: Sequence[Any], metric: str) -> float:
    """Row-count-weighted mean of ``metric`` ("auroc" or "ap") over groups that hold both classes."""
    fn = {"auroc": auroc, "ap": average_precision}[metric]
    yy = np.asarray(y, dtype=np.float64)
    ss = np.asarray(score, dtype=np.float64)
    gg = np.asarray([str(g) for g in groups])
    keep = np.isfinite(yy) & np.isfinite(ss)
    values, weights = [], []
    for g in np.unique(gg[keep]):
        sel = keep & (gg == g)
        v = fn(yy[sel], ss[sel])
        if math.isfinite(v):
            values.append(v)
            weights.append(int(sel.sum()))
    if not values:
        return NAN
    w = np.asarray(weights, dtype=np.float64)
    return float(np.dot(values, w / w.sum()))


def spearman(a: Sequence[Any], b: Sequence[Any]) -> float:
    from scipy.stats import spearmanr

    aa = np.asarray([NAN if v is None else v for v in a], dtype=np.float64)
    bb = np.asarray([NAN if v is None else v for v in b], dtype=np.float64)
    keep = np.isfinite(aa) & np.isfinite(bb)
    if keep.sum() < 2 or np.ptp(aa[keep]) == 0 or np.ptp(bb[keep]) == 0:
        return NAN
    return float(spearmanr(aa[keep], bb[keep]).statistic)
