"""hexamer vep / embed / plot from the command line, on the shipped chr20 slice."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pysam
from typer.testing import CliRunner

from hexamer.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data" / "vep"


def test_vep_table_and_vcf(tiny_folder: Path, tmp_path: Path) -> None:
    table = tmp_path / "scores.parquet"
    args = [
        "vep",
        "-m",
        str(tiny_folder),
        "--vcf",
        str(DATA / "edge_cases.vcf"),
        "--fasta",
        str(DATA / "chr20_slice.fa.gz"),
        "--window",
        "600",
    ]
    result = runner.invoke(app, [*args, "-o", str(table)])
    assert result.exit_code == 0, result.output
    rows = pq.read_table(table).to_pylist()
    gridded = tmp_path / "gridded.parquet"
    result = runner.invoke(app, [*args, "--window-grid", "200", "-o", str(gridded)])
    assert result.exit_code == 0, result.output
    grid_rows = pq.read_table(gridded).to_pylist()
    # the grid moves the windows: the SNV right after the N gap then shares a 6-mer with an N
    moved = {r["id"]: r for r in grid_rows}["after_gap"]
    assert moved["status"] == "skipped" and "<oov>" in moved["reason"]
    assert [r["status"] for r in grid_rows if r["id"] != "after_gap"] == [
        r["status"] for r in rows if r["id"] != "after_gap"
    ]
    assert any(
        abs(a["score"] - b["score"]) > 1e-9
        for a, b in zip(rows, grid_rows, strict=True)
        if a["status"] == b["status"] == "ok"
    )
    n_records = sum(
        1 for line in (DATA / "edge_cases.vcf").read_text().splitlines() if line and line[0] != "#"
    )
    assert len({r["record"] for r in rows}) == n_records  # every input record is in the output
    assert {r["status"] for r in rows} >= {"ok", "skipped"}
    vcf_out = tmp_path / "scored.vcf.gz"
    result = runner.invoke(app, [*args, "-o", str(vcf_out)])
    assert result.exit_code == 0, result.output
    with pysam.VariantFile(str(vcf_out)) as vf:
        assert "HEXAMER_SCORE" in vf.header.info
    plot = tmp_path / "hist.png"
    result = runner.invoke(app, ["plot", "hist", str(table), "-o", str(plot), "--by", "status"])
    assert result.exit_code == 0, result.output
    assert plot.stat().st_size > 1000


def test_vep_plot_and_threads(tiny_folder: Path, tmp_path: Path) -> None:
    import torch

    before = torch.get_num_threads()
    plot = tmp_path / "dist.png"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "edge_cases.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(tmp_path / "s.tsv")]
    try:
        result = runner.invoke(app, [*args, "--plot", str(plot), "--threads", "1"])
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "'SNV': 9" in result.output  # counts per variant kind are printed
    bad = runner.invoke(app, [*args, "--plot", str(tmp_path / "dist.txt")])
    assert bad.exit_code != 0 and ".png" in bad.output


def test_vep_token_budget_is_a_setting_resume_checks(tiny_folder: Path, tmp_path: Path) -> None:
    """--token-budget reaches the engine, and resuming with another value names the one to pass."""
    from hexamer.vep.resume import sidecar_dir

    out = tmp_path / "b.tsv"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "edge_cases.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(out)]
    first = runner.invoke(app, [*args, "--token-budget", "300"])
    assert first.exit_code == 0, first.output
    side = sidecar_dir(out)
    side.mkdir()  # a sidecar left by a killed run with a budget of 300
    (side / "meta.json").write_text(
        '{"version": 0, "settings": {"token_budget": 300}, "vcf": null, "fasta": null, "model": null, "output": "b.tsv"}'
    )
    again = runner.invoke(app, [*args, "--token-budget", "512", "--resume"])
    assert again.exit_code == 2
    assert "token_budget 300 -> 512" in again.output and "--token-budget 300" in again.output
    bad = runner.invoke(app, [*args, "--token-budget", "0"])
    assert bad.exit_code != 0


def test_vep_bad_input(tiny_folder: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "vep",
            "-m",
            str(tiny_folder),
            "--vcf",
            str(tmp_path / "none.vcf"),
            "--fasta",
            str(DATA / "chr20_slice.fa.gz"),
            "-o",
            str(tmp_path / "x.tsv"),
        ],
    )
    assert result.exit_code == 2
    assert "none.vcf" in result.output


def test_embed_and_roc(tiny_folder: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "seqs.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n>b\nTTTTGGGGCCCCAAAA\n>bad\nACGTX\n")
    out = tmp_path / "emb.parquet"
    result = runner.invoke(
        app, ["embed", "-m", str(tiny_folder), "-i", str(fasta), "-o", str(out), "--pool", "sep"]
    )
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.num_rows == 3  # the bad record stays, with its reason
    bad = next(r for r in table.to_pylist() if r["id"] == "bad")
    assert bad["embedding"] is None and "'X'" in bad["error"]
    labels = tmp_path / "labels.tsv"
    labels.write_text("score\tlabel\n0.1\t0\n0.9\t1\n0.4\t0\n0.8\t1\n")
    png = tmp_path / "roc.svg"
    result = runner.invoke(app, ["plot", "roc", str(labels), "-o", str(png), "--label-col", "label"])
    assert result.exit_code == 0, result.output
    assert "1.0000" in result.output and png.is_file()
