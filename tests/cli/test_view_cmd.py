"""``hexamer view`` and ``hexamer report`` on the command line: bad input is one ``error:`` line
naming the file, exit 2, before any server starts."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from hexamer.testing.cli import error_message, run, run_json
from tests.view.conftest import FASTA, VIEW


def _refused(args: list[str]) -> str:
    result = run(args)
    assert result.exit_code == 2, result.output
    return error_message(result)


def test_view_bad_input_names_the_file(tmp_path: Path) -> None:
    odd = tmp_path / "scores.parquet"
    odd.write_bytes(b"PAR1")
    assert f"{odd}: igv.js cannot show" in _refused(["view", str(odd), "--fasta", str(FASTA), "--no-browser"])
    bare = tmp_path / "scored.vcf.gz"
    shutil.copy(VIEW / "scored.vcf.gz", bare)
    message = _refused(["view", str(bare), "--fasta", str(FASTA), "--no-browser"])
    assert f"tabix -p vcf {bare}" in message
    other = tmp_path / "other.vcf"
    other.write_text(
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchrY\t5\t.\tA\tC\t.\t.\t.\n"
    )
    message = _refused(["view", str(other), "--fasta", str(FASTA), "--no-browser"])
    assert message == f"{other}: contigs not in the reference: chrY"
    assert "no reference" in _refused(["view", str(VIEW / "entropy.bw"), "--no-browser"])
    message = _refused(
        ["view", str(VIEW / "entropy.bw"), "--fasta", str(FASTA), "--region", "20:5", "--no-browser"]
    )
    assert "--region must be contig:start-end" in message


def test_view_port_in_use() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        args = ["view", str(VIEW / "entropy.bw"), "--fasta", str(FASTA), "--port", str(port), "--no-browser"]
        assert f"port {port} on 127.0.0.1 is in use" in _refused(args)


def test_report_json_and_errors(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    summary = run_json(
        [
            "report",
            str(VIEW / "scored.vcf"),
            "--fasta",
            str(FASTA),
            "-t",
            str(VIEW / "entropy.bw"),
            "-o",
            str(out),
        ]
    )
    assert summary == {
        "out": str(out),
        "records": 9,
        "rows": 9,
        "bytes": out.stat().st_size,
        "tracks": ["entropy"],
    }
    message = _refused(
        ["report", str(VIEW / "scored.vcf"), "--fasta", str(FASTA), "-t", str(VIEW / "regions.bed")]
    )
    assert message.startswith(f"{VIEW / 'regions.bed'}: a report embeds bigWig tracks only")


@pytest.mark.parametrize("flank", ["-1", "5001"])
def test_report_flank_range(flank: str) -> None:
    result = run(["report", str(VIEW / "scored.vcf"), "--fasta", str(FASTA), "--flank", flank])
    assert result.exit_code == 2


def test_serve_view_checks_files_before_the_model(tmp_path: Path) -> None:
    odd = tmp_path / "scores.parquet"
    odd.write_bytes(b"PAR1")
    message = _refused(
        ["serve", "--model", str(tmp_path / "no-such-model"), "--view", str(FASTA), "--view", str(odd)]
    )
    assert message.startswith(f"{odd}: igv.js cannot show")
