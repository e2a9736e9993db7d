"""Score histograms, ROC and PR figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer.plots import plot_pr, plot_roc, plot_score_hist


@pytest.fixture
def labelled() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    return rng.normal(size=300) + labels, labels


@pytest.mark.parametrize("ext", ["png", "svg"])
def test_figures_are_written_by_extension(
    tmp_path: Path, labelled: tuple[np.ndarray, np.ndarray], ext: str
) -> None:
    scores, labels = labelled
    hist = tmp_path / f"hist.{ext}"
    counts = plot_score_hist(hist, [*scores, None, float("nan")], [*labels, 1, 0], title="scores")
    assert counts == {str(k): int((labels == k).sum()) for k in (0, 1)}  # missing scores not counted
    aucs = plot_roc(tmp_path / f"roc.{ext}", {"model": scores, "inverted": -scores}, labels)
    aps = plot_pr(tmp_path / f"pr.{ext}", scores, labels)
    for name in ("hist", "roc", "pr"):
        data = (tmp_path / f"{name}.{ext}").read_bytes()
        assert data.startswith(b"\x89PNG") if ext == "png" else b"<svg" in data[:2000]
    from sklearn.metrics import average_precision_score, roc_auc_score

    assert aucs["model"] == pytest.approx(roc_auc_score(labels, scores))
    assert aucs["inverted"] == pytest.approx(1 - aucs["model"])
    assert aps["score"] == pytest.approx(average_precision_score(labels, scores))
    assert not list(tmp_path.glob(".*.tmp"))  # atomic: no temp file left behind


def test_histogram_groups_by_status(tmp_path: Path) -> None:
    counts = plot_score_hist(tmp_path / "h.png", [0.1, -0.2, None, 0.3], ["ok", "ok", "skipped", "ok"])
    assert counts == {"ok": 3, "skipped": 0}


def test_bad_inputs(tmp_path: Path, labelled: tuple[np.ndarray, np.ndarray]) -> None:
    scores, labels = labelled
    with pytest.raises(ValueError, match=r"\.png, \.svg"):
        plot_roc(tmp_path / "roc.jpg", scores, labels)
    with pytest.raises(ValueError, match="both classes"):
        plot_roc(tmp_path / "roc.png", scores, np.ones_like(labels))
    with pytest.raises(ValueError, match="0/1"):
        plot_pr(tmp_path / "pr.png", scores, labels * 2)
    with pytest.raises(ValueError, match="scores for"):
        plot_roc(tmp_path / "roc.png", scores[:10], labels)
    assert not list(tmp_path.iterdir())
