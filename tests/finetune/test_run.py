"""run_finetune end to end on the shipped demo model (linear probe: fast), real human DNA with
simulated motif labels; the metrics written are recomputed from the saved predictions with scipy."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.csv as pacsv
import pytest
from scipy import stats
from sklearn import metrics as skm

from hexamer.finetune.data import ReadOptions
from hexamer.finetune.inputs import DataError
from hexamer.finetune.options import FitOptions
from hexamer.finetune.run import InputSpec, SplitSpec, run_finetune
from hexamer.finetune.splits import SplitError
from tests.finetune.motif_data import motif_task

DEMO = Path(__file__).resolve().parents[2] / "hexamer" / "data" / "demo-model"
PROBE = FitOptions(method="probe", pooling="mean", probe_ridge=1.0, eval_batch_size=64)
PROBE_SGD = FitOptions(
    method="probe", pooling="mean", epochs=3, batch_size=16, lr=0.03, warmup=0.0, eval_batch_size=64
)


def write_motif_table(path: Path, n: int = 160, length: int = 60, seed: int = 0) -> Path:
    seqs, activity, has = motif_task(n, length=length, seed=seed)
    chroms = [["1", "2", "7", "13", "19", "X"][i % 6] for i in range(n)]
    lines = ["id\tchrom\tsequence\tactivity\thas_motif"]
    lines += [
        f"s{i}\tchr{c}\t{s}\t{a:.4f}\t{h}"
        for i, (c, s, a, h) in enumerate(zip(chroms, seqs, activity, has, strict=True))
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _table(path: Path) -> dict[str, list]:
    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t")).to_pydict()


def test_regression_run_writes_model_metrics_predictions_figures(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv")
    read = ReadOptions(task="regression", label_columns=("activity",))
    split = SplitSpec(valid_chroms=("19", "X"), test_chroms=("7", "13"))
    res = run_finetune(str(DEMO), InputSpec(str(data)), tmp_path / "out", read, PROBE, split=split)
    out = tmp_path / "out"
    assert (out / "best" / "config.json").is_file() and res.model_folder == out / "best"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["split"]["valid"] > 0 and metrics["split"]["test"] > 0
    assert set(metrics["model"]) == {"train", "valid", "test"} and metrics["baseline"]["k"] in range(1, 7)
    for name in ("scatter_valid.png", "scatter_test.png", "predictions.tsv"):
        assert (out / name).is_file()
    table = _table(out / "predictions.tsv")
    assert len(table["id"]) == 160 and sorted(table["id"]) == sorted(f"s{i}" for i in range(160))
    test = [i for i, s in enumerate(table["split"]) if s == "test"]
    assert {table["chrom"][i] for i in test} == {"chr7", "chr13"}
    y = [table["activity_observed"][i] for i in test]
    for column, where in (
        ("activity", metrics["model"]),
        ("baseline_activity", metrics["baseline"]["metrics"]),
    ):
        p = [table[column][i] for i in test]
        assert where["test"]["pearson"] == pytest.approx(stats.pearsonr(y, p)[0], abs=1e-6)
        assert where["test"]["r2"] == pytest.approx(skm.r2_score(y, p), abs=1e-6)
    assert res.summary()["selection_metric"] == "pearson"


def test_classification_run_with_separate_valid_file(tmp_path: Path) -> None:
    train = write_motif_table(tmp_path / "train.tsv", n=120, seed=1)
    valid = write_motif_table(tmp_path / "valid.tsv", n=40, seed=2)
    read = ReadOptions(task="classification", label_columns=("has_motif",))
    res = run_finetune(
        str(DEMO),
        InputSpec(str(train)),
        tmp_path / "out",
        read,
        PROBE_SGD,
        valid=InputSpec(str(valid)),
        baseline=False,
    )
    m = res.metrics
    assert m["task"]["kind"] == "binary" and m["selection_metric"] == "mcc"
    assert m["split"]["valid"] == 40 and "baseline" not in m
    table = _table(tmp_path / "out" / "predictions.tsv")
    assert len(table["id"]) == 160 and "valid:s0" in table["id"]  # ids clashing with train are qualified
    assert {"has_motif_observed", "has_motif", "p_0", "p_1"} <= set(table)
    assert (tmp_path / "out" / "roc_valid.png").is_file()


def test_bad_input_fails_before_the_model_loads(tmp_path: Path) -> None:
    data = write_motif_table(tmp_path / "motif.tsv", n=30)
    read = ReadOptions(task="regression", label_columns=("activity",))
    with pytest.raises(
        SplitError, match=r"--test-chroms 8 matches no row; chromosomes in the data: chr1 \(5\)"
    ):
        run_finetune(
            "/nonexistent/model",
            InputSpec(str(data)),
            tmp_path / "o",
            read,
            PROBE,
            split=SplitSpec(test_chroms=("8",)),
        )
    with pytest.raises(DataError, match="no label column 'K562'"):
        run_finetune(
            "/nonexistent/model", InputSpec(str(data)), tmp_path / "o", ReadOptions("regression", ("K562",))
        )
    long = tmp_path / "long.tsv"
    long.write_text("id\tsequence\ty\na\t" + "ACGT" * 2000 + "\t1\nb\tACGT\t2\n")
    with pytest.raises(DataError, match=r"long.tsv: row 1 \(id 'a'\): sequence of 8000 bp is longer"):
        run_finetune(
            str(DEMO), InputSpec(str(long)), tmp_path / "o", ReadOptions("regression", ("y",)), PROBE
        )
    short = tmp_path / "short.tsv"
    short.write_text("id\tsequence\ty\na\tACGTAC\t1\nb\tACGTAA\t2\nc\tACGTTT\t3\n")
    with pytest.raises(DataError, match=r"long.tsv: row 1 \(id 'a'\): sequence of 8000 bp"):
        run_finetune(
            str(DEMO), InputSpec(str(short)), tmp_path / "o", ReadOptions("regression", ("y",)), PROBE,
            valid=InputSpec(str(long)),
        )  # fmt: skip
    assert not (tmp_path / "o").exists()
