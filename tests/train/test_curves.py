"""Training curves are drawn from metrics.jsonl: loss per step and held-out accuracy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.train.curves import plot_training_curves, read_metrics


def test_curves_from_metrics(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    rows = [{"step": s, "loss": 1.4 - 0.1 * s, "ce": 1.4 - 0.1 * s, "fns": None} for s in (1, 2, 3)]
    rows.append({"step": 3, "val_accuracy": 0.31, "val_bp_loss": 1.3})
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_metrics(metrics) == rows
    out = plot_training_curves(metrics)
    assert out == tmp_path / "curves.png" and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plot_training_curves(metrics, tmp_path / "c.svg", title="run")
    assert b"<svg" in svg.read_bytes()[:500]


def test_a_bad_line_names_the_file_and_line(tmp_path: Path) -> None:
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1, "loss": 1.0}\nnot json\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl: line 2"):
        read_metrics(metrics)
