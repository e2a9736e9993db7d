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
    summary = run_json(
        [*args, "--output-dir", out, "--valid-chroms", "19,chrX", "--test-chroms", "7,13", *PROBE]
    )
    assert summary["task"] == "regression" and summary["selection_metric"] == "pearson"
    assert summary["split"]["test"] == 40 and summary["split"]["valid"] == 40
    assert (
        set(summary["model_metrics"]) == {"train", "valid", "test"} and "test" in summary["baseline_metrics"]
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"]["test"]["pearson"] == summary["model_metrics"]["test"]
    assert (out / "best" / "config.json").is_file() and (out / "curves.png").is_file()


def test_finetune_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=24)
    base = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--output-dir", tmp_path / "o"]
    result = run([*base, "--label-columns", "activity", "--test-chroms", "8"])
    assert result.exit_code == 2
    assert error_message(result).startswith(
        "--test-chroms 8 matches no row; chromosomes in the data: chr1 (4)"
    )
    result = run([*base, "--label-columns", "K562"])
    assert result.exit_code == 2 and "no label column 'K562'" in error_message(result)
    bad = tmp_path / "bad.tsv"
    bad.write_text("id\tsequence\ty\na\tACGTACGT\t1\nb\tACGTACGT\tnan\n")
    result = run(
        [
            "finetune",
            "-m",
            DEMO,
            "--train",
            bad,
            "--task",
            "regression",
            "--label-columns",
            "y",
            "--output-dir",
            tmp_path / "o",
        ]
    )
    assert (
        result.exit_code == 2 and error_message(result) == f"{bad}: row 2 (id 'b'): column 'y': label is NaN"
    )
    assert "--epochs or --steps" in str(
        usage_error([*base, "--label-columns", "activity", "--epochs", "1", "--steps", "2"])
    )
    assert not (tmp_path / "o").exists()


def test_finetune_kfold_classification(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=60)
    args = [
        "finetune",
        "-m",
        DEMO,
        "--train",
        data,
        "--task",
        "classification",
        "--label-columns",
        "has_motif",
    ]
    summary = run_json([*args, "--output-dir", tmp_path / "cv", "--folds", "3", "--no-baseline", *PROBE])
    assert summary["folds"] == 3 and summary["selection_metric"] == "mcc"
    assert summary["model_test"]["folds"] == 3 and summary["baseline_test"] is None
    assert (tmp_path / "cv" / "fold_03" / "predictions.tsv").is_file()
    err = usage_error([*args, "--output-dir", tmp_path / "x", "--folds", "3", "--test-chroms", "7"])
    assert "--folds makes its own splits; drop --valid-chroms/--test-chroms" in str(err)


def test_finetune_reads_a_table_from_stdin(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=60)
    args = ["finetune", "-m", DEMO, "--train", "-", "--task", "regression", "--label-columns", "activity"]
    summary = run_json(
        [*args, "--output-dir", tmp_path / "o", "--no-baseline", *PROBE], input=data.read_text()
    )
    assert summary["split"]["train"] + summary["split"]["valid"] + summary["split"]["test"] == 60


def test_finetune_training_options_reach_the_fit(tmp_path: Path) -> None:
    from hexamer.finetune.state import read_fit_state

    data = write_motif_table(tmp_path / "motif.tsv", n=36)
    out = tmp_path / "lora"
    args = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--label-columns", "activity"]
    tuned = ["--method", "lora", "--steps", "2", "--batch-size", "4", "--grad-accum", "2", "--lr", "0.002",
             "--head-lr", "0.01", "--weight-decay", "0", "--warmup", "0", "--schedule", "constant",
             "--min-lr-ratio", "0.1", "--max-grad-norm", "0.5", "--patience", "3", "--eval-every", "1",
             "--loss", "huber", "--huber-delta", "2", "--pooling", "last", "--layer", "2", "--shift-augment",
             "--rc-augment", "--rc-average", "--lora-rank", "2", "--lora-alpha", "4", "--lora-dropout", "0.1",
             "--lora-targets", "q_proj,v_proj", "--no-baseline", "--seed", "3", "--plateau-factor", "0.25",
             "--plateau-patience", "2", "--checkpoint-every", "1", "--eval-batch-size", "7"]  # fmt: skip
    summary = run_json([*args, "--output-dir", out, *tuned])
    assert summary["model_metrics"]["test"] is not None or summary["model_metrics"]["valid"] is None
    options = read_fit_state(out)["options"]
    assert {k: options[k] for k in ("method", "steps", "batch_size", "grad_accum", "lr", "head_lr")} == {
        "method": "lora", "steps": 2, "batch_size": 4, "grad_accum": 2, "lr": 0.002, "head_lr": 0.01,
    }  # fmt: skip
    assert (options["weight_decay"], options["warmup"], options["schedule"], options["min_lr_ratio"]) == (
        0.0, 0.0, "constant", 0.1,
    )  # fmt: skip
    assert (options["max_grad_norm"], options["patience"], options["eval_every"], options["loss"]) == (
        0.5, 3, 1, "huber",
    )  # fmt: skip
    assert (options["huber_delta"], options["pooling"], options["layer"], options["seed"]) == (
        2.0,
        "last",
        2,
        3,
    )
    assert options["shift_augment"] and options["rc_augment"] and options["rc_average"]
    assert (options["plateau_factor"], options["plateau_patience"], options["checkpoint_every"]) == (
        0.25,
        2,
        1,
    )
    assert options["eval_batch_size"] == 7
    assert options["lora"] == {"rank": 2, "alpha": 4.0, "dropout": 0.1, "targets": ["q_proj", "v_proj"]}
    config = json.loads((out / "best" / "config.json").read_text())["hexamer_finetune"]
    assert config["pooling"] == "last" and config["layer"] == 2


def test_finetune_option_ranges_are_checked_when_parsed(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=12)
    base = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--label-columns", "activity",
            "--output-dir", tmp_path / "o"]  # fmt: skip
    for option, value in (
        ("--lr", "0"), ("--lr", "2"), ("--head-lr", "-1"), ("--weight-decay", "-0.1"), ("--warmup", "1.5"),
        ("--schedule", "linear"), ("--grad-accum", "0"), ("--patience", "0"), ("--max-grad-norm", "0"),
        ("--loss", "l1"), ("--pooling", "max"), ("--lora-rank", "0"), ("--lora-alpha", "0"),
        ("--lora-dropout", "1"), ("--min-lr-ratio", "2"), ("--huber-delta", "0"), ("--eval-every", "0"),
        ("--batch-size", "0"), ("--probe-ridge", "-1"), ("--plateau-factor", "1"), ("--plateau-factor", "0"),
        ("--plateau-patience", "0"), ("--checkpoint-every", "0"), ("--eval-batch-size", "0"),
    ):  # fmt: skip
        assert str(usage_error([*base, option, value])), (option, value)
    result = run([*base, "--lora-targets", "q_proj,foo"])
    assert result.exit_code == 2 and "LoRA targets must be distinct names" in error_message(result)
    result = run([*base, "--class-weights", "1,x"])
    assert result.exit_code == 2 and "--class-weights takes comma-separated numbers" in error_message(result)
    result = run([*base, "--method", "probe", "--shift-augment"])
    assert result.exit_code == 2 and "shift_augment" in error_message(result)
    assert not (tmp_path / "o").exists()
    result = run([*base, "--layer", "9"])
    assert result.exit_code == 2 and "layer" in error_message(result)


def test_finetune_recipe_knobs_and_the_logistic_probe(tmp_path: Path) -> None:
    from hexamer.finetune.state import read_fit_state

    data = write_motif_table(tmp_path / "motif.tsv", n=60)
    reg = ["finetune", "-m", DEMO, "--train", data, "--task", "regression", "--label-columns", "activity"]
    out = tmp_path / "reg"
    run_json(
        [
            *reg,
            "--output-dir",
            out,
            "--no-baseline",
            "--duplicate-above",
            "1.5",
            "--adam-beta2",
            "0.95",
            *PROBE,
        ]
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert any("high-activity training rows repeated 1 more time" in n for n in metrics["notes"])
    options = read_fit_state(out)["options"]
    assert (
        options["adam_beta2"] == 0.95
        and options["pearson_lambda"] == 0.2
        and options["plateau_patience"] == 3
    )
    both = [*reg, "--output-dir", tmp_path / "x", "--duplicate-above", "1", "--duplicate-quantile", "0.9"]
    assert "not both" in str(usage_error(both))
    cls = [
        "finetune",
        "-m",
        DEMO,
        "--train",
        data,
        "--task",
        "classification",
        "--label-columns",
        "has_motif",
    ]
    summary = run_json(
        [*cls, "--output-dir", tmp_path / "cls", "--no-baseline", "--method", "probe", "--probe-logistic"]
    )
    assert summary["selection_metric"] == "mcc"
    history = json.loads((tmp_path / "cls" / "metrics.json").read_text())["fit"]["history"]
    assert history[-1]["probe"]["C"] in (0.001, 0.01, 0.1, 1.0, 10.0, 100.0)
    result = run([*cls, "--output-dir", tmp_path / "y", "--probe-logistic"])  # the default method is full
    assert result.exit_code == 2 and "probe_logistic is for method='probe'" in error_message(result)
