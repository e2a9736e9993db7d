"""``hexamer finetune`` through the CLI on a tiny real-DNA table (human chr20 windows, simulated
motif labels) and the shipped demo model: files, the ``--json`` summary, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from hexamer.testing.cli import error_message, run, run_json, usage_error
from tests.finetune.test_run import DEMO, write_motif_table

PROBE = ["--method", "probe", "--pooling", "mean", "--epochs", "2", "--batch-size", "16", "--lr", "0.03"]


def test_finetune_regression_by_chromosome(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=120)
    out = tmp_path / "run"
    args = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--label-columns", "activity"]
    summary = run_json([*args, "--output-dir", out, "--valid-chroms", "19,chrX", "--test-chroms", "7,13", *PROBE])
    assert summary["task"] == "regression" and summary["selection_metric"] == "pearson"
    assert summary["split"]["test"] == 40 and summary["split"]["valid"] == 40
    assert set(summary["model_metrics"]) == {"train", "valid", "test"} and "test" in summary["baseline_metrics"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"]["test"]["pearson"] == summary["model_metrics"]["test"]
    assert (out / "best" / "config.json").is_file() and (out / "curves.png").is_file()


def test_finetune_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=24)
    base = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--output-dir", tmp_path / "o"]
    result = run([*base, "--label-columns", "activity", "--test-chroms", "8"])
    assert result.exit_code == 2
    assert error_message(result).startswith("--test-chroms 8 matches no row; chromosomes in the data: chr1 (4)")
    result = run([*base, "--label-columns", "K562"])
    assert result.exit_code == 2 and "no label column 'K562'" in error_message(result)
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\tsequence\ty\na\tACGTACGT\t1\nb\tACGTACGT\tnan\n")
    result = run(["finetune", "-m", DEMO, "--train", bad, "--task", "regression", "--label-columns", "y", "--output-dir", tmp_path / "o"])
    assert result.exit_code == 2 and error_message(result) == f"{bad}: row 2 (id 'b'): column 'y': label is NaN"
    assert "--epochs or --steps" in str(usage_error([*base, "--label-columns", "activity", "--epochs", "1", "--steps", "2"]))
    assert not (tmp_path / "o").exists()


def test_finetune_kfold_classification(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=60)
    args = ["finetune", "-m", DEMO, "--train", data, "--task", "classification", "--label-columns", "has_motif"]
    summary = run_json([*args, "--output-dir", tmp_path / "cv", "--folds", "3", "--no-baseline", *PROBE])
    assert summary["folds"] == 3 and summary["selection_metric"] == "mcc"
    assert summary["model_test"]["folds"] == 3 and summary["baseline_test"] is None
    assert (tmp_path / "cv" / "fold_03" / "predictions.tsv").is_file()
    err = usage_error([*args, "--output-dir", tmp_path / "x", "--folds", "3", "--test-chroms", "7"])
    assert "--folds makes its own splits; drop --valid-chroms/--test-chroms" in str(err)


def test_finetune_reads_a_table_from_stdin(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=60)
    args = ["finetune", "-m", DEMO, "--train", "-", "--task", "regression", "--label-columns", "activity"]
    summary = run_json([*args, "--output-dir", tmp_path / "o", "--no-baseline", *PROBE], input=data.read_text())
    assert summary["split"]["train"] + summary["split"]["valid"] + summary["split"]["test"] == 60
