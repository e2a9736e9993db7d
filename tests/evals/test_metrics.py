"""The published metrics against scikit-learn/scipy called directly, and hand-computed toy cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score

from hexamer.evals.metrics import auprc_trapezoid, auroc, average_precision, by_group_weighted, spearman


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    s = y * 0.8 + rng.normal(size=200)
    return y, s


def test_global_metrics_match_sklearn(data) -> None:
    y, s = data
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s))
    p, r, _ = precision_recall_curve(y, s)
    assert auprc_trapezoid(y, s) == pytest.approx(auc(r, p))
    assert average_precision(y, s) == pytest.approx(average_precision_score(y, s))
    assert auprc_trapezoid(y, s) != pytest.approx(average_precision(y, s))  # trapezoid, not AP


def test_by_chrom_weighted_toy_case() -> None:
    """Two chromosomes with both classes plus one with a single class (skipped), by hand.

    chr1: y = 1 0 1 0, scores 4 3 2 1: pairs (pos>neg) = (4>3, 4>1, 2>1) of 4 -> AUROC 0.75;
          AP = mean precision at each positive = (1/1 + 2/3) / 2 = 5/6.
    chr2: y = 0 1, scores 1 2 -> AUROC 1, AP 1.   chrX: y = 1 1 (one class) -> skipped.
    Weights 4 and 2 labelled variants -> 2/3 and 1/3.
    """
    y = [1, 0, 1, 0, 0, 1, 1, 1]
    s = [4, 3, 2, 1, 1, 2, 5, 6]
    g = ["1", "1", "1", "1", "2", "2", "X", "X"]
    assert by_group_weighted(y, s, g, "auroc") == pytest.approx(0.75 * 2 / 3 + 1 / 3)
    assert by_group_weighted(y, s, g, "ap") == pytest.approx(5 / 6 * 2 / 3 + 1 / 3)


def test_by_chrom_weighted_matches_sklearn_per_group(data) -> None:
    y, s = data
    g = np.array(["1", "2", "3", "X"])[np.arange(len(y)) % 4]
    want_roc = want_ap = 0.0
    for c in np.unique(g):
        sel = g == c
        w = sel.sum() / len(y)
        want_roc += w * roc_auc_score(y[sel], s[sel])
        want_ap += w * average_precision_score(y[sel], s[sel])
    assert by_group_weighted(y, s, g, "auroc") == pytest.approx(want_roc)
    assert by_group_weighted(y, s, g, "ap") == pytest.approx(want_ap)


def test_spearman_matches_scipy(data) -> None:
    y, s = data
    a = np.round(s, 1)  # ties
    assert spearman(a.tolist(), y.tolist()) == pytest.approx(spearmanr(a, y).statistic)
    assert spearman([1.0, None, 3.0, 2.0], [1.0, 5.0, 2.0, 3.0]) == pytest.approx(
        spearmanr([1, 3, 2], [1, 2, 3]).statistic
    )


def test_undefined_metrics_are_nan() -> None:
    assert math.isnan(auroc([1, 1], [0.1, 0.2]))
    assert math.isnan(auprc_trapezoid([], []))
    assert math.isnan(by_group_weighted([1, 0], [1.0, 2.0], ["1", "2"], "auroc"))
    assert math.isnan(spearman([None, None], [1, 2]))
    assert auroc([1, 0, 1], [0.9, float("nan"), 0.1]) != auroc([1, 0, 1], [0.9, 0.2, 0.1])  # NaN rows dropped


@pytest.mark.parametrize("seed", range(12))
def test_numpy_curves_equal_sklearn_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    y = rng.integers(0, 2, n)
    y[:2] = [0, 1]
    s = np.round(y * rng.uniform(0, 2) + rng.normal(size=n), int(rng.integers(0, 3)))  # many ties
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s), rel=1e-12, abs=1e-12)
    p, r, _ = precision_recall_curve(y, s)
    assert auprc_trapezoid(y, s) == pytest.approx(auc(r, p), rel=1e-12, abs=1e-12)
    assert average_precision(y, s) == pytest.approx(average_precision_score(y, s), rel=1e-12, abs=1e-12)
