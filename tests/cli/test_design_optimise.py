"""``hexamer design --method evolve|anneal|minimal-edit``: candidates, trajectory and figure files,
``--json``; every step keeps the rules (DNA Chisel judges); bad input exits 2 before the model."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from hexamer.cli import app
from hexamer.design import DesignConstraints, check
from tests.design.peer import chisel_failures

START = "GCATGAAAGTGCTGTGGACCGATTCAGGTACCAAGGTCTTCAACGTAG"  # 48 bp, meets SPEC
RULES = ["--gc", "0.3:0.7", "--gc-window", "12", "--avoid-site", "BsaI", "--max-homopolymer", "3"]
RULES += ["--prefix", "GC"]
SPEC = DesignConstraints(
    48, gc=(0.3, 0.7), gc_window=12, avoid_sites=("BsaI",), max_homopolymer=3, prefix="GC"
)


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["design", *args])
    return res.exit_code, res.stdout, res.stderr


def test_start_meets_the_rules() -> None:
    assert all(r.passed for r in check(SPEC, START)) and chisel_failures(SPEC, START) == []


def test_evolve_parquet_trajectory_plot_json(tiny_folder: Path, tmp_path: Path) -> None:
    out, traj, fig = tmp_path / "e.parquet", tmp_path / "t.tsv", tmp_path / "t.png"
    code, stdout, stderr = run(
        "--model", str(tiny_folder), *RULES, "--method", "evolve", "--oracle", "motif:CANNTG",
        "--start", START, "--weight", "0.5", "--keep", "2", "--n", "2", "--rounds", "3",
        "--frozen", "0-9", "-o", str(out), "--trajectory", str(traj), "--plot", str(fig), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["method"] == "evolve" and summary["found"] == 2 and summary["all_pass"]
    assert summary["best_objective"] >= summary["start_objective"]
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 2 and rows[0]["objective"] >= rows[1]["objective"]
    for row in rows:
        assert row["pass"] and chisel_failures(SPEC, row["sequence"]) == []
        assert row["sequence"][:10] == START[:10]  # frozen
        assert len(row["base_log_probs"]) == 48
        assert sum(row["base_log_probs"]) == pytest.approx(row["log_likelihood"], abs=1e-6)
        assert row["n_edits"] == sum(a != b for a, b in zip(row["sequence"], START, strict=True))
    steps = list(csv.DictReader(traj.open(), delimiter="\t"))
    objectives = [float(s["objective"]) for s in steps]
    assert objectives == sorted(objectives)  # evolution never accepts a worse step
    for s in steps:
        assert all(r.passed for r in check(SPEC, s["sequence"]))
    assert fig.stat().st_size > 0


def test_minimal_edit_pwm_fasta(tiny_folder: Path, tmp_path: Path) -> None:
    pwm = tmp_path / "m.jaspar"
    pwm.write_text(">MA0001 toy\nA [ 0 9 0 0 ]\nC [ 9 0 0 0 ]\nG [ 0 0 9 0 ]\nT [ 0 0 0 9 ]\n")
    out = tmp_path / "m.fa"
    code, stdout, stderr = run(
        "--model", str(tiny_folder), *RULES, "--method", "minimal-edit", "--oracle", f"pwm-counts:{pwm}",
        "--start", START, "--max-edits", "2", "--frozen", "20-47", "-o", str(out), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["n_edits"] <= 2 and summary["all_pass"]
    header, seq = out.read_text().splitlines()[:2]
    assert header.startswith(">design_1 log_likelihood=") and "objective=" in header
    assert seq[20:] == START[20:] and sum(a != b for a, b in zip(seq, START, strict=True)) <= 2
    assert chisel_failures(SPEC, seq) == []


def test_anneal_head_oracle_length_from_start(tiny_folder: Path, tmp_path: Path) -> None:
    from hexamer.testing.heads import build_head_folder

    head = build_head_folder(tmp_path / "head", max_length=60)
    out = tmp_path / "a.tsv"
    code, stdout, stderr = run(
        "--model", str(tiny_folder), "--method", "anneal", "--oracle", f"{head}:activity",
        "--start", START, "--steps", "4", "--seed", "3", "-o", str(out), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["steps"] == 4
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert len(rows) == 1 and float(rows[0]["oracle"]) == pytest.approx(summary["best_oracle"], rel=1e-6)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--method", "evolve"], "needs --oracle"),
        (["--method", "minimal-edit", "--oracle", "motif:CANNTG"], "max_edits"),
        (["--method", "evolve", "--oracle", "motif:CANZTG"], "IUPAC"),
        (["--method", "evolve", "--oracle", "pwm:/no/such.txt"], "cannot read"),
        (["--method", "evolve", "--oracle", "/no/such/head"], "no such head folder"),
        (["--method", "evolve", "--oracle", "motif:CA", "--start", START[:40]], "has 40 bases"),
        (
            ["--method", "evolve", "--oracle", "motif:CA", "--start", "GC" + "A" * 46],
            "breaks the constraints",
        ),
        (["--method", "evolve", "--oracle", "motif:CA", "--frozen", "40-60"], "outside"),
        (["--method", "anneal", "--oracle", "motif:CA", "--max-edits", "49"], "more than the 48"),
        (["--method", "evolve", "--oracle", "motif:CA", "--n", "3", "--keep", "2"], "keep"),
        (["--method", "anneal", "--oracle", "motif:CA", "--t-start", "0.1", "--t-end", "1"], "t_end"),
        (["--method", "evolve", "--oracle", "pwm:x", "--specificity"], "specificity"),
        (["--method", "evolve", "--oracle", "motif:CA", "--plot", "x.gif"], "figures"),
    ],
)
def test_bad_input_exits_2_before_the_model(tmp_path: Path, args: list[str], words: str) -> None:
    missing = tmp_path / "no-model"  # never opened: the error comes first
    code, _, stderr = run(
        "--model", str(missing), "--length", "48", *RULES, *args, "-o", str(tmp_path / "x.fa")
    )
    assert code == 2, stderr
    assert stderr.startswith("error:") and words in stderr


def test_bad_matrix_file_names_the_line(tmp_path: Path) -> None:
    pwm = tmp_path / "bad.txt"
    pwm.write_text("A C G T\n1 2 3 4\n1 2 x 4\n")
    code, _, stderr = run(
        "--model", str(tmp_path / "none"), "--method", "evolve", "--oracle", f"pwm:{pwm}", "--start", START,
        "-o", str(tmp_path / "x.fa"),
    )  # fmt: skip
    assert code == 2 and "line 3" in stderr


def test_evolve_keeps_the_edit_budget(tiny_folder: Path, tmp_path: Path) -> None:
    out, traj = tmp_path / "b.tsv", tmp_path / "bt.tsv"
    code, _, stderr = run(
        "--model", str(tiny_folder), *RULES, "--method", "evolve", "--oracle", "motif:CANNTG",
        "--start", START, "--max-edits", "1", "--rounds", "4", "-o", str(out), "--trajectory", str(traj), "--json",
    )  # fmt: skip
    assert code == 0, stderr
    for s in csv.DictReader(traj.open(), delimiter="\t"):
        assert int(s["n_edits"]) <= 1
