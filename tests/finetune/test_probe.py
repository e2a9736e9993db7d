"""The logistic probe is scikit-learn's logistic regression: the saved head reproduces its
decision_function and predict_proba on the same features, and C is the validation's choice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer.finetune.fit import fit
from hexamer.finetune.folders import load_classifier
from hexamer.finetune.metrics import metric_for
from hexamer.finetune.options import FitOptions
from hexamer.finetune.predict import pooled_features, predict
from hexamer.finetune.probe import C_GRID, fit_logistic_probe, logistic_head
from hexamer.finetune.task import LabelledSet, TaskSpec
from tests.finetune.conftest import random_dna

BINARY = TaskSpec("binary", ("label",), ("low", "high"))


def _features(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (x @ rng.normal(size=d) + rng.normal(scale=0.5, size=n) > 0).astype(np.int64)
    return x, y


def test_binary_head_is_sklearn_decision_function() -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = _features(80, 6, seed=0)
    coef, converged = logistic_head(BINARY, x, y, c=0.5)
    ref = LogisticRegression(C=0.5, fit_intercept=False, max_iter=2000).fit(x, y)
    logits = x @ coef.T.astype(np.float64)
    assert converged
    np.testing.assert_allclose(logits[:, 1] - logits[:, 0], ref.decision_function(x), rtol=1e-5, atol=1e-5)
    probs = torch.softmax(torch.as_tensor(logits), dim=1).numpy()
    np.testing.assert_allclose(probs, ref.predict_proba(x), atol=1e-6)


def test_multiclass_and_multilabel_heads_match_sklearn() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(1)
    x = rng.normal(size=(90, 5))
    y = np.argmax(x[:, :3] + rng.normal(scale=0.3, size=(90, 3)), axis=1)
    weights = rng.uniform(0.5, 2, 90)
    multi = TaskSpec("multiclass", ("label",), ("a", "b", "c"))
    coef, _ = logistic_head(multi, x, y, c=2.0, weights=weights)
    ref = LogisticRegression(C=2.0, fit_intercept=False, max_iter=2000).fit(x, y, sample_weight=weights)
    np.testing.assert_allclose(x @ coef.T.astype(np.float64), ref.decision_function(x), rtol=1e-4, atol=1e-4)
    labels = (x[:, :2] > 0).astype(np.float32)
    ml = TaskSpec("multilabel", ("p", "q"))
    coef, _ = logistic_head(ml, x, labels, c=1.0, class_weights=(1.0, 3.0))
    for j, cw in enumerate((1.0, 3.0)):
        one = LogisticRegression(C=1.0, fit_intercept=False, max_iter=2000, class_weight={0: 1.0, 1: cw})
        one.fit(x, labels[:, j].astype(int))
        np.testing.assert_allclose(
            x @ coef[j].astype(np.float64), one.decision_function(x), rtol=1e-4, atol=1e-4
        )


def test_c_is_chosen_by_the_validation_score() -> None:
    x, y = _features(60, 4, seed=2)
    seen = []

    def score(coef: np.ndarray) -> float:
        seen.append(float(np.abs(coef).sum()))
        return -abs(len(seen) - 3)  # the third C of the grid scores best

    fitted = fit_logistic_probe(BINARY, x, y, valid_score=score)
    assert fitted.c == C_GRID[2] and list(fitted.scores) == list(C_GRID)
    assert fit_logistic_probe(BINARY, x, y, valid_score=lambda c: float("nan")).c == 1.0
    with pytest.raises(ValueError, match="for classification"):
        fit_logistic_probe(TaskSpec("regression", ("y",)), x, y.astype(np.float32)[:, None])


def _gc_classes(n: int, seed: int) -> LabelledSet:
    rng = np.random.default_rng(seed)
    seqs, labels = [], []
    for i, s in enumerate(random_dna(n, 30, seed=seed)):
        high = i % 2
        if high:  # GC-rich rows are class 1
            s = "".join(c if rng.random() < 0.4 else rng.choice(list("GC")) for c in s)
        seqs.append(s)
        labels.append(high)
    return LabelledSet(tuple(f"r{i}" for i in range(n)), tuple(seqs), np.array(labels, dtype=np.int64))


def test_a_fitted_probe_folder_reproduces_sklearn(tiny_folder: Path, tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression

    train, valid = _gc_classes(40, seed=0), _gc_classes(20, seed=1)
    metric, higher = metric_for(BINARY)
    options = FitOptions(method="probe", probe_logistic=True, pooling="mean")
    result = fit(
        tiny_folder, train, valid, BINARY, options, tmp_path / "run", metric=metric, higher_is_better=higher
    )
    chosen = result.history[-1]["probe"]["C"]
    assert chosen in C_GRID and result.best_score is not None
    # the same features, the same C: scikit-learn's own model
    model = load_classifier(result.best_folder)
    feats = pooled_features(model, train.sequences, batch_size=32)
    ref = LogisticRegression(C=chosen, fit_intercept=False, max_iter=2000).fit(feats, train.labels)
    vfeats = pooled_features(model, valid.sequences, batch_size=32)
    probs = predict(result.best_folder, valid.sequences)
    np.testing.assert_allclose(probs, ref.predict_proba(vfeats), atol=1e-4)
    regression = LabelledSet(train.ids, train.sequences, train.labels.astype(np.float32)[:, None])
    with pytest.raises(ValueError, match="classification probe"):
        fit(tiny_folder, regression, None, TaskSpec("regression", ("y",)), options, tmp_path / "r")
    with pytest.raises(ValueError, match="method='probe'"):
        FitOptions(method="full", probe_logistic=True)
