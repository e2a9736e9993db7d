"""``hexamer design``: files and ``--json`` on good input; one ``error:`` line and exit 2 on bad
input, before the model is loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from hexamer.cli import app
from hexamer.design import DesignConstraints, check
from tests.design.peer import chisel_failures

RULES = ["--length", "48", "--gc", "0.3:0.7", "--gc-window", "12", "--avoid-site", "BsaI"]
RULES += ["--avoid-site", "EcoRI", "--max-homopolymer", "3", "--prefix", "GC", "--translate-to", "MKVLW"]
SPEC = DesignConstraints(
    48, gc=(0.3, 0.7), gc_window=12, avoid_sites=("BsaI", "EcoRI"), max_homopolymer=3, prefix="GC",
    translate_to="MKVLW",
)  # fmt: skip


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["design", *args])
    return res.exit_code, res.stdout, res.stderr


def test_parquet_table_and_json(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "d.parquet"
    code, stdout, _ = run("--model", str(tiny_folder), *RULES, "--n", "3", "-o", str(out), "--json")
    assert code == 0
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["found"] == 3 and summary["all_pass"]
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 3
    for row in rows:
        assert row["pass"] and row["site BsaI"] == 0 and row["translate_to"] == "MKVLW"
        assert len(row["base_log_probs"]) == 48
        assert sum(row["base_log_probs"]) == pytest.approx(row["log_likelihood"], abs=1e-6)
        assert chisel_failures(SPEC, row["sequence"]) == []


def test_fasta_beam(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "d.fa"
    code, _, _ = run("--model", str(tiny_folder), *RULES, "--method", "beam", "--width", "3", "-o", str(out))
    assert code == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith(">design_1 log_likelihood=")
    assert all(r.passed for r in check(SPEC, lines[1]))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--avoid-site", "FooI"], "known enzymes"),
        (["--gc", "0.7:0.2"], "gc must be"),
        (["--gc", "abc"], "--gc must be MIN:MAX"),
        (["--gc", "0.4:0.6", "--gc-window", "99"], "larger than the length"),
        (["--translate-to", "MKZ"], "not amino acids"),
        (["--prefix", "A" * 50], "longer than the length"),
        (["--mask", "ACGTX"], "not an IUPAC"),
        (["--mask", "AAAAAA", "--max-homopolymer", "3"], "max_homopolymer"),
    ],
)
def test_bad_input_exits_2_before_the_model(tmp_path: Path, args: list[str], words: str) -> None:
    missing = tmp_path / "no-model"  # never opened: the error comes first
    code, _, stderr = run("--model", str(missing), "--length", "48", *args, "-o", str(tmp_path / "x.fa"))
    assert code == 2
    assert stderr.startswith("error:") and words in stderr


def test_unknown_output_format(tmp_path: Path) -> None:
    code, _, stderr = run("--length", "20", "-o", str(tmp_path / "x.xlsx"))
    assert code == 2 and "table format" in stderr
