"""What ``score`` and ``generate`` share: the input is opened and checked before the model loads,
and a malformed record is one skipped row, never a silently scored one."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hexamer.testing.cli import error_message, run, run_json

IO_DATA = Path(__file__).resolve().parent.parent / "data" / "io"


@pytest.mark.parametrize("command", ["score", "generate"])
def test_a_fasta_with_only_a_bare_header_is_refused_before_the_model_loads(command: str) -> None:
    fasta = IO_DATA / "bare_header.fa"
    # the model does not exist: the input's error coming first shows no load was tried
    result = run([command, "-m", "/nonexistent/model", "-i", fasta])
    assert result.exit_code == 2
    assert error_message(result).startswith(f"{fasta}: line 1: the only FASTA header is a bare '>'")


def test_a_fastq_record_without_quality_lines_is_skipped_with_its_reason(
    tiny_folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scores.tsv"
    summary = run_json(["score", "-m", tiny_folder, "-i", IO_DATA / "truncated_last_record.fq", "-o", out])
    assert summary["status_counts"] == {"ok": 2, "skipped": 1}
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [(r["id"], r["status"]) for r in rows] == [("r1", "ok"), ("r2", "ok"), ("r3", "skipped")]
    assert rows[2]["error"].startswith("truncated FASTQ record")
