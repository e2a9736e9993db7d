"""k-fold cross-validation (NT protocol) end to end on the demo model (ridge probe: fast)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hexamer.finetune.data import ReadOptions
from hexamer.finetune.kfold import run_kfold
from hexamer.finetune.run import InputSpec
from tests.finetune.test_run import DEMO, PROBE, write_motif_table


def test_kfold_with_fixed_test_set_summarises_every_fold(tmp_path: Path) -> None:
    train = write_motif_table(tmp_path / "train.tsv", n=60, seed=3)
    test = write_motif_table(tmp_path / "test.tsv", n=30, seed=4)
    read = ReadOptions(task="regression", label_columns=("activity",))
    res = run_kfold(
        str(DEMO), InputSpec(str(train)), tmp_path / "cv", read, PROBE, test=InputSpec(str(test)), folds=3
    )
    top = json.loads((tmp_path / "cv" / "metrics.json").read_text())
    assert len(top["folds"]) == 3 and "fixed test set" in top["protocol"]
    per_fold = []
    for k in range(3):
        fold = json.loads((tmp_path / "cv" / f"fold_{k + 1:02d}" / "metrics.json").read_text())
        assert fold["split"]["train"] == 40 and fold["split"]["valid"] == 20 and fold["split"]["test"] == 30
        per_fold.append(fold["model"]["test"]["pearson"])
    summary = top["model"]["pearson"]
    assert summary["values"] == per_fold and summary["mean"] == pytest.approx(np.mean(per_fold))
    assert summary["low"] == pytest.approx(np.mean(per_fold) - 2 * np.std(per_fold, ddof=1))
    assert top["baseline"]["pearson"]["defined"] == 3
    s = res.summary()
    assert s["folds"] == 3 and s["model_test"]["mean"] == summary["mean"]


def test_kfold_without_test_holds_each_fold_out_as_test(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "d.tsv", n=40, seed=5)
    read = ReadOptions(task="regression", label_columns=("activity",))
    res = run_kfold(str(DEMO), InputSpec(str(data)), tmp_path / "cv", read, PROBE, folds=4, baseline=False)
    assert "each fold is the test set" in res.metrics["protocol"] and "baseline" not in res.metrics
    splits = [f["split"] for f in res.metrics["folds"]]
    assert all(s["valid"] == 0 and s["test"] == 10 for s in splits)
