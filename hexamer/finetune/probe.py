"""A convex classification probe: the ``score`` head fitted as scikit-learn's L2-penalised
logistic regression on cached features, instead of by gradient steps.

The head is bias-free (``LlamaForSequenceClassification``'s ``score``), so the regression has no
intercept. What the fitted head computes is exactly scikit-learn's ``decision_function``:

* binary (two logits, softmax, as the NT recipe): the two rows are ``-w/2`` and ``+w/2``, so
  ``logit1 - logit0 = x . w`` and the softmax's positive probability is ``predict_proba``;
* multiclass: the rows are the multinomial model's ``coef_`` (the logits are its decision values);
* multilabel: one binary model per label, row ``l`` its ``coef_`` (sigmoid per label).

The penalty C is chosen on the validation rows by the run's selection metric over
:data:`C_GRID` (ties: the smaller C, the simpler model); without validation rows, C = 1.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hexamer.finetune.task import TaskSpec

__all__ = ["C_GRID", "LogisticProbe", "fit_logistic_probe", "logistic_head"]

#: the inverse penalties tried on the validation rows
C_GRID = (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
_MAX_ITER = 2000


@dataclass(frozen=True)
class LogisticProbe:
    """The fitted head (``(num_labels, hidden)``), its C and the validation score of every C tried."""

    coef: np.ndarray
    c: float
    scores: dict[float, float] = field(default_factory=dict)
    converged: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "solver": "sklearn LogisticRegression(lbfgs, no intercept)",
            "C": self.c,
            "validation_scores": {
                str(c): (None if not np.isfinite(v) else v) for c, v in self.scores.items()
            },
            "converged": self.converged,
        }


def _model(c: float, class_weight: dict[int, float] | None) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, fit_intercept=False, max_iter=_MAX_ITER, class_weight=class_weight)


def logistic_head(
    task: TaskSpec,
    x: np.ndarray,
    y: np.ndarray,
    *,
    c: float = 1.0,
    weights: np.ndarray | None = None,
    class_weights: Sequence[float] | None = None,
) -> tuple[np.ndarray, bool]:
    """The ``score`` weight ``(num_labels, hidden)`` of a logistic regression with inverse
    penalty ``c`` on features ``x``, and whether lbfgs converged. ``class_weights``: one per class
    (binary, multiclass) or the positive weight per label (multilabel), as the ce / bce losses."""
    from sklearn.exceptions import ConvergenceWarning

    x = np.asarray(x, dtype=np.float64)
    converged = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        if task.kind == "multilabel":
            rows = []
            for j in range(task.num_labels):
                cw = None if class_weights is None else {0: 1.0, 1: float(class_weights[j])}
                labels = np.asarray(y[:, j]).astype(np.int64)
                rows.append(_model(c, cw).fit(x, labels, sample_weight=weights).coef_[0])
            coef = np.stack(rows)
        else:
            cw = None if class_weights is None else {i: float(w) for i, w in enumerate(class_weights)}
            model = _model(c, cw).fit(x, np.asarray(y).astype(np.int64), sample_weight=weights)
            if task.kind == "binary":
                w = model.coef_[0]
                coef = np.stack([-w / 2, w / 2])
            else:
                coef = _full_classes(model, task.num_labels)
        converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return coef.astype(np.float32), converged


def _full_classes(model: Any, num_labels: int) -> np.ndarray:
    """``coef_`` with a row for every class of the task (scikit-learn only models the classes it
    saw; a class absent from the training rows gets a zero row)."""
    if len(model.classes_) == num_labels:
        return model.coef_
    coef = np.zeros((num_labels, model.coef_.shape[1]))
    coef[model.classes_] = model.coef_
    return coef


def fit_logistic_probe(
    task: TaskSpec,
    x: np.ndarray,
    y: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    class_weights: Sequence[float] | None = None,
    valid_score: Callable[[np.ndarray], float] | None = None,
    higher_is_better: bool = True,
) -> LogisticProbe:
    """:func:`logistic_head` with C chosen by ``valid_score(coef)`` (the selection metric on the
    validation rows; NaN never wins) over :data:`C_GRID`; C = 1 without it."""
    if task.kind not in ("binary", "multiclass", "multilabel"):
        raise ValueError(f"a logistic probe is for classification, not {task.kind}")
    if valid_score is None:
        coef, ok = logistic_head(task, x, y, c=1.0, weights=weights, class_weights=class_weights)
        return LogisticProbe(coef, 1.0, {}, ok)
    best: tuple[float, np.ndarray, bool] | None = None
    scores: dict[float, float] = {}
    for c in C_GRID:
        coef, ok = logistic_head(task, x, y, c=c, weights=weights, class_weights=class_weights)
        scores[c] = value = float(valid_score(coef))
        if not np.isfinite(value):
            continue
        prev = None if best is None else scores[best[0]]
        if prev is None or (value > prev if higher_is_better else value < prev):
            best = (c, coef, ok)
    if best is None:  # no C gave a defined score: the default penalty
        coef, ok = logistic_head(task, x, y, c=1.0, weights=weights, class_weights=class_weights)
        return LogisticProbe(coef, 1.0, scores, ok)
    return LogisticProbe(best[1], best[0], scores, best[2])
