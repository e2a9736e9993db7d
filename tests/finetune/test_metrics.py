"""Fine-tuning metrics against their peers: scipy.stats and sklearn.metrics on the same arrays."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from hexamer.finetune.metrics import (
    classification_metrics,
    evaluate,
    metric_for,
    probabilities,
    regression_metrics,
)
from hexamer.finetune.task import TaskSpec


def _close(a: float | None, b: float) -> None:
    assert a is not None
    assert math.isclose(a, float(b), rel_tol=1e-9, abs_tol=1e-12), (a, b)


def test_regression_equals_scipy_and_sklearn_per_target_and_mean() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=(200, 3))
    p = y * [0.5, 1.0, -0.2] + rng.normal(size=(200, 3))
    p[:20, 1] = np.round(p[:20, 1])  # ties for Spearman
    y[:30, 2] = 1.0
    out = regression_metrics(y, p, ["K562", "HepG2", "SKNSH"])
    for j, name in enumerate(["K562", "HepG2", "SKNSH"]):
        got = out["per_target"][name]
        _close(got["pearson"], stats.pearsonr(y[:, j], p[:, j]).statistic)
        _close(got["spearman"], stats.spearmanr(y[:, j], p[:, j]).statistic)
        _close(got["r2"], skm.r2_score(y[:, j], p[:, j]))
    _close(out["pearson"], np.mean([stats.pearsonr(y[:, j], p[:, j]).statistic for j in range(3)]))
    _close(out["r2"], skm.r2_score(y, p))  # sklearn's uniform average over outputs
    assert out["n"] == 200 and out["excluded"] == 0 and out["undefined"] == {}


def test_regression_mask_drops_rows() -> None:
    rng = np.random.default_rng(1)
    y, p = rng.normal(size=100), rng.normal(size=100)
    mask = rng.random(100) > 0.3
    out = regression_metrics(y, p, ["a"], mask=mask)
    _close(out["pearson"], stats.pearsonr(y[mask], p[mask]).statistic)
    assert out["n"] == mask.sum() and out["excluded"] == (~mask).sum()


def test_constant_predictions_are_none_with_reason_never_nan() -> None:
    y = np.arange(10.0)[:, None].repeat(2, axis=1)
    p = y.copy()
    p[:, 1] = 3.0
    out = regression_metrics(y, p, ["a", "b"])
    assert out["per_target"]["a"]["pearson"] == pytest.approx(1.0)
    assert out["per_target"]["b"]["pearson"] is None
    assert "constant predictions" in out["undefined"]["per_target.b.pearson"]
    assert out["pearson"] is None and "'b'" in out["undefined"]["pearson"]
    assert out["per_target"]["b"]["r2"] is not None  # R² is defined: the labels vary


def test_binary_equals_sklearn() -> None:
    rng = np.random.default_rng(2)
    t = rng.integers(0, 2, 300)
    logits = np.c_[np.zeros(300), t * 1.2 + rng.normal(size=300)]
    prob = probabilities("binary", logits)
    out = classification_metrics("binary", t, prob, ["neg", "pos"])
    pred = prob.argmax(1)
    _close(out["auroc"], skm.roc_auc_score(t, prob[:, 1]))
    _close(out["auprc"], skm.average_precision_score(t, prob[:, 1]))
    _close(out["mcc"], skm.matthews_corrcoef(t, pred))
    _close(out["accuracy"], skm.accuracy_score(t, pred))
    _close(out["f1"], skm.f1_score(t, pred))


def test_binary_one_class_and_constant_predictions_are_none() -> None:
    t = np.zeros(20, dtype=np.int64)
    prob = np.tile([0.3, 0.7], (20, 1))
    out = classification_metrics("binary", t, prob, ["a", "b"])
    assert out["auroc"] is None and out["auprc"] is None and out["mcc"] is None
    assert "one class" in out["undefined"]["auroc"]
    t[:5] = 1
    out = classification_metrics("binary", t, prob, ["a", "b"])
    assert out["mcc"] is None and "constant predictions" in out["undefined"]["mcc"]
    assert out["auroc"] == pytest.approx(0.5)


def test_multiclass_equals_sklearn_macro_and_per_class() -> None:
    rng = np.random.default_rng(3)
    t = rng.integers(0, 4, 400)
    logits = rng.normal(size=(400, 4))
    logits[np.arange(400), t] += 1.0
    prob = probabilities("multiclass", logits)
    names = ["a", "b", "c", "d"]
    out = classification_metrics("multiclass", t, prob, names)
    pred = prob.argmax(1)
    _close(out["auroc"], skm.roc_auc_score(t, prob, multi_class="ovr", average="macro"))
    onehot = np.eye(4)[t]
    _close(out["auprc"], skm.average_precision_score(onehot, prob, average="macro"))
    _close(out["mcc"], skm.matthews_corrcoef(t, pred))
    _close(out["accuracy"], skm.accuracy_score(t, pred))
    _close(out["f1"], skm.f1_score(t, pred, average="macro"))
    per_f1 = skm.f1_score(t, pred, average=None)
    for k, name in enumerate(names):
        _close(out["per_class"][name]["f1"], per_f1[k])
        _close(out["per_class"][name]["auroc"], skm.roc_auc_score(t == k, prob[:, k]))


def test_multiclass_absent_class_makes_macro_auroc_none() -> None:
    rng = np.random.default_rng(4)
    t = rng.integers(0, 2, 50)  # class 2 never labelled
    prob = probabilities("multiclass", rng.normal(size=(50, 3)))
    out = classification_metrics("multiclass", t, prob, ["a", "b", "c"])
    assert out["per_class"]["c"]["auroc"] is None and out["auroc"] is None
    assert "'c'" in out["undefined"]["auroc"]
    assert out["mcc"] is not None


def test_multilabel_equals_sklearn() -> None:
    rng = np.random.default_rng(5)
    t = (rng.random((300, 3)) < [0.2, 0.5, 0.7]).astype(np.float32)
    logits = (t - 0.5) * 2 + rng.normal(size=(300, 3))
    prob = probabilities("multilabel", logits)
    out = classification_metrics("multilabel", t, prob, ["x", "y", "z"])
    pred = (prob > 0.5).astype(int)
    _close(out["auroc"], skm.roc_auc_score(t, prob, average="macro"))
    _close(out["auprc"], skm.average_precision_score(t, prob, average="macro"))
    _close(out["f1"], skm.f1_score(t, pred, average="macro"))
    _close(out["subset_accuracy"], skm.accuracy_score(t, pred))
    _close(out["mcc"], np.mean([skm.matthews_corrcoef(t[:, k], pred[:, k]) for k in range(3)]))


def test_metric_for_and_evaluate_by_task() -> None:
    rng = np.random.default_rng(6)
    reg = TaskSpec("regression", ("a", "b"))
    fn, higher = metric_for(reg)
    y = rng.normal(size=(50, 2)).astype(np.float32)
    p = y + rng.normal(size=(50, 2))
    assert higher and fn(y, p) == pytest.approx(
        np.mean([stats.pearsonr(y[:, j], p[:, j])[0] for j in range(2)])
    )
    binary = TaskSpec("binary", ("label",), ("neg", "pos"))
    fn, higher = metric_for(binary, mask=np.arange(50) < 40)
    t = rng.integers(0, 2, 50)
    logits = np.c_[np.zeros(50), t + rng.normal(size=50)]
    pred = logits.argmax(1)
    prob = probabilities("binary", logits)
    assert higher and fn(t, prob) == pytest.approx(skm.matthews_corrcoef(t[:40], pred[:40]))
    assert math.isnan(fn(t, np.full((50, 2), 0.5)))  # constant predictions: NaN for fit, None in reports
    assert evaluate(binary, t, np.full((50, 2), 0.5))["mcc"] is None
    ml = TaskSpec("multilabel", ("x", "y"))
    assert metric_for(ml)[0].__name__ == "auroc"
    report = evaluate(ml, np.eye(2)[t], rng.normal(size=(50, 2)))
    assert set(report["per_class"]) == {"x", "y"}


def test_nan_predictions_make_metrics_undefined_not_an_error() -> None:
    out = regression_metrics(np.arange(4.0), [1.0, np.nan, 2.0, 3.0], ["a"])
    assert out["pearson"] is None and "1 prediction(s) are NaN" in out["undefined"]["per_target.a.pearson"]
    fn, _ = metric_for(TaskSpec("binary", ("y",), ("0", "1")))
    assert math.isnan(fn(np.array([0, 1]), np.array([[0.0, np.nan], [0.0, 1.0]])))
    out = evaluate(TaskSpec("multiclass", ("y",), ("a", "b", "c")), [0, 1, 2], np.full((3, 3), np.nan))
    assert out["auroc"] is None and out["per_class"]["a"]["auroc"] is None


def test_bad_shapes_and_nan_labels_are_errors() -> None:
    with pytest.raises(ValueError, match="NaN"):
        regression_metrics([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        regression_metrics(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="class indices"):
        classification_metrics("binary", [0, 2], np.full((2, 2), 0.5), ["a", "b"])
