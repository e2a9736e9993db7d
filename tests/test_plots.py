"""hexamer.plots: string labels with a positive class, titles, axis units and the score's sign."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer.plots import binary_labels, plot_pr, plot_roc, plot_score_hist, score_axis_label


def test_string_labels_need_the_positive_class() -> None:
    labels = ["benign", "pathogenic", None, "benign", "pathogenic"]
    y = binary_labels(labels, positive="pathogenic")
    assert np.array_equal(y[[0, 1, 3, 4]], [0, 1, 0, 1]) and np.isnan(y[2])
    with pytest.raises(ValueError, match="positive"):
        binary_labels(labels)
    with pytest.raises(ValueError, match="likely_benign"):
        binary_labels(labels, positive="likely_benign")
    assert binary_labels([0, 1, True]).tolist() == [0.0, 1.0, 1.0]


def test_auroc_with_string_labels_equals_scikit_learn(tmp_path: Path) -> None:
    from sklearn.metrics import average_precision_score, roc_auc_score

    scores = np.array([0.1, 0.9, 0.4, 0.3, 0.8, 0.6])
    labels = ["b", "p", "b", "p", "b", "p"]
    y = [lab == "p" for lab in labels]
    auc = plot_roc(tmp_path / "roc.svg", scores, labels, positive="p", title="ROC: test")
    ap = plot_pr(tmp_path / "pr.svg", scores, labels, positive="p")
    assert auc["score"] == pytest.approx(roc_auc_score(y, scores))
    assert ap["score"] == pytest.approx(average_precision_score(y, scores))
    svg = (tmp_path / "roc.svg").read_text()
    assert "ROC: test" in svg and "sensitivity" in svg


def test_histogram_has_a_title_and_says_what_the_sign_means(tmp_path: Path) -> None:
    label = score_axis_label("window")
    assert "LL(alt) − LL(ref)" in label and "nats" in label and "< 0" in label
    assert "> 0" in score_axis_label("next_base")
    assert score_axis_label("window", negated=True).startswith("−(LL(alt) − LL(ref), nats)")
    assert score_axis_label("my_col") == "my_col"
    out = tmp_path / "h.svg"
    plot_score_hist(out, [0.1, -0.2, 0.3], xlabel=label)
    svg = out.read_text()
    assert "Score distribution" in svg and "count" in svg
