"""Report files: strict metrics.json, prediction tables with every row on the raw scale, figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import pytest
from scipy import stats

from hexamer.finetune.metrics import evaluate, probabilities
from hexamer.finetune.report import (
    plot_classification_curves,
    plot_history,
    plot_observed_vs_predicted,
    prediction_rows,
    write_json,
    write_predictions,
)
from hexamer.finetune.splits import split_random
from hexamer.finetune.task import LabelledSet, TaskSpec


def _data(labels: np.ndarray, mask: np.ndarray | None = None) -> LabelledSet:
    n = len(labels)
    return LabelledSet(
        tuple(f"r{i}" for i in range(n)), ("ACGT",) * n, labels, chroms=("1",) * n, metric_mask=mask
    )


def test_metrics_json_is_strict_and_atomic(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    write_json(path, {"pearson": np.float32(0.5), "r2": None, "per": np.arange(2)})
    assert json.loads(path.read_text()) == {"pearson": 0.5, "r2": None, "per": [0, 1]}
    with pytest.raises(ValueError, match="non-finite"):
        write_json(path, {"x": float("nan")})
    assert json.loads(path.read_text())["pearson"] == 0.5  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_regression_table_has_every_row_and_metrics_recompute_from_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(size=(30, 2)).astype(np.float32)
    pred = y + rng.normal(size=(30, 2))
    mask = np.arange(30) % 4 != 0
    data = _data(y, mask)
    task = TaskSpec("regression", ("K562", "HepG2"))
    split = split_random(30, seed=0)
    rows = prediction_rows(task, data, split.labels(30), pred, baseline=pred * 0.5)
    path = tmp_path / "predictions.tsv"
    write_predictions(path, rows)
    table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t")).to_pydict()
    assert table["id"] == list(data.ids) and sorted(set(table["split"])) == ["test", "train", "valid"]
    assert list(table)[:4] == ["id", "split", "chrom", "in_metrics"]
    assert {"K562_observed", "K562", "baseline_K562", "HepG2"} <= set(table)
    # the saved predictions give the same metric as scipy on the same rows
    test = [i for i, s in enumerate(table["split"]) if s == "test" and table["in_metrics"][i]]
    saved = stats.pearsonr([table["K562_observed"][i] for i in test], [table["K562"][i] for i in test])[0]
    sub = split.test[mask[split.test]]
    again = evaluate(task, y[sub], pred[sub])["per_target"]["K562"]["pearson"]
    assert math.isclose(saved, again, rel_tol=1e-6)


def test_classification_table_and_curves(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 40)
    logits = probabilities("multiclass", rng.normal(size=(40, 3)))
    task = TaskSpec("multiclass", ("class",), ("enh", "prom", "sil"))
    rows = prediction_rows(task, _data(y), ["test"] * 40, logits)
    assert rows[0]["class_observed"] == task.output_names[y[0]]
    assert rows[0]["class"] == task.output_names[int(np.argmax(logits[0]))]
    assert math.isclose(sum(rows[0][f"p_{c}"] for c in task.output_names), 1.0)
    plot_classification_curves(tmp_path / "roc.png", tmp_path / "pr.png", task, y, logits)
    binary = TaskSpec("binary", ("y",), ("0", "1"))
    plot_classification_curves(
        tmp_path / "roc2.png", tmp_path / "pr2.png", binary, y % 2, probabilities("binary", logits[:, :2])
    )
    for name in ("roc.png", "pr.png", "roc2.png", "pr2.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_scatter_and_history_figures(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    y = rng.normal(size=(50, 2))
    plot_observed_vs_predicted(tmp_path / "scatter.png", ["a", "b"], y, y + rng.normal(size=(50, 2)))
    history = [
        {"step": s, "train_loss": 1 / s, "valid_loss": 1.5 / s, "valid_pearson": 1 - 1 / s}
        for s in range(1, 6)
    ]
    history.append({"step": 6, "train_loss": 0.1})
    plot_history(tmp_path / "curves.png", history)
    assert (tmp_path / "scatter.png").stat().st_size > 1000 and (
        tmp_path / "curves.png"
    ).stat().st_size > 1000
