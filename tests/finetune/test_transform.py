"""Label transform (z-score on train only, identity for classification) and row duplication."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.finetune.transform import LabelTransform, duplicate_high_activity


def _set(labels: np.ndarray) -> LabelledSet:
    n = len(labels)
    return LabelledSet(
        ids=tuple(f"r{i}" for i in range(n)),
        sequences=("ACGT",) * n,
        labels=labels,
        weights=np.ones(n, np.float32),
        chroms=tuple(str(i % 3) for i in range(n)),
    )


def test_zscore_fitted_on_train_round_trips_through_json() -> None:
    rng = np.random.default_rng(0)
    task = TaskSpec("regression", ("K562", "HepG2"))
    train = (rng.normal(size=(100, 2)) * [2.0, 0.5] + [3.0, -1.0]).astype(np.float32)
    t = LabelTransform.fit(task, train)
    z = t.forward(train)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(z.std(0), 1, atol=1e-5)
    np.testing.assert_allclose(t.mean, train.astype(np.float64).mean(0))
    again = LabelTransform.from_json(json.loads(json.dumps(t.to_json())))
    assert again == t
    other = rng.normal(size=(7, 2))
    np.testing.assert_allclose(again.inverse(again.forward(other)), other, atol=1e-5)
    assert t.apply(_set(train)).labels.dtype == np.float32


def test_identity_for_classification_and_constant_target_refused() -> None:
    task = TaskSpec("binary", ("label",), ("neg", "pos"))
    t = LabelTransform.fit(task, np.array([0, 1], np.int64))
    assert t.kind == "identity" and t.columns == ("neg", "pos")
    y = np.array([0, 1, 1])
    assert t.forward(y) is y and t.inverse(y) is y
    with pytest.raises(ValueError, match=r"'b'.*constant"):
        LabelTransform.fit(TaskSpec("regression", ("a", "b")), np.array([[1.0, 2.0], [2.0, 2.0]]))
    with pytest.raises(ValueError, match=r"s\.d\."):
        LabelTransform.from_json({"kind": "zscore", "columns": ["a"], "mean": [0.0], "std": [0.0]})


def test_duplicate_high_activity_by_quantile_and_threshold() -> None:
    labels = np.arange(20, dtype=np.float32).reshape(10, 2)  # rows 0..9, targets increasing
    train = _set(labels)
    out, n = duplicate_high_activity(train, copies=2, quantile=0.8)
    high = np.flatnonzero((labels > np.quantile(labels, 0.8, axis=0)).any(axis=1))
    assert n == high.size == 2 and len(out) == 10 + 2 * 2
    assert out.ids[-1] == f"r{high[-1]}~dup2" and len(set(out.ids)) == len(out)
    np.testing.assert_array_equal(out.labels[10:12], labels[high])
    assert out.chroms[10] == train.chroms[high[0]]
    out, n = duplicate_high_activity(train, quantile=None, threshold=16.5, targets=[0])
    assert n == 1 and out.ids[-1] == "r9~dup1"
    with pytest.raises(ValueError, match="exactly one"):
        duplicate_high_activity(train, quantile=0.5, threshold=1.0)
    with pytest.raises(ValueError, match="regression"):
        duplicate_high_activity(_set(np.zeros(3, np.int64)))
