"""``hexamer ism`` and ``hexamer calibrate`` through the CLI: files and ``--json`` summaries."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pysam
import pytest

from hexamer.testing.cli import error_message, run, run_json, usage_error

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
SMALL = ["--window", "240"]


def test_ism_region_tabix_and_plots(tiny_folder, tmp_path) -> None:
    out, heat, logo = tmp_path / "ism.tsv.bgz", tmp_path / "heat.png", tmp_path / "logo.png"
    args = ["ism", "-m", tiny_folder, "--fasta", FASTA, "-r", "20:60301-60306", "-o", out, *SMALL]
    summary = run_json([*args, "--plot", heat, "--logo", logo])
    assert summary["n_rows"] == 18 and summary["n_written"] == 18 and summary["status_counts"] == {"ok": 18}
    assert summary["format"] == "cadd" and heat.stat().st_size > 1000 and logo.stat().st_size > 1000
    with pysam.TabixFile(str(out)) as tbx:
        assert len(list(tbx.fetch("20", 60302, 60304))) == 6


def test_ism_sites_parquet_and_calibration(tiny_folder, tmp_path) -> None:
    cal = tmp_path / "cal.json"
    made = run_json(
        [
            "calibrate",
            "-m",
            tiny_folder,
            "--fasta",
            FASTA,
            "-o",
            cal,
            *SMALL,
            "--regions",
            "2",
            "--region-bp",
            "5",
        ]
    )
    assert made["n_scores"] == 30 and made["settings"]["window"] == 240
    vcf = DATA / "chr20_slice.vcf"
    out = tmp_path / "ism.parquet"
    args = ["ism", "-m", tiny_folder, "--fasta", FASTA, "--vcf", vcf, "--flank", "1", "-o", out, *SMALL]
    summary = run_json([*args, "--calibration", cal])
    table = pq.read_table(out).to_pylist()
    assert summary["n_rows"] == len(table) > 0
    assert all(r["phred"] is not None for r in table if r["status"] == "ok")
    # another window: the calibration is refused before scoring, naming the setting
    bad = run([*args[:-2], "--window", "300", "--calibration", cal])
    assert bad.exit_code == 2 and "window=300" in error_message(bad)


def test_vep_calibration_info_keys(tiny_folder, tmp_path) -> None:
    cal = tmp_path / "cal.json"
    run_json(["calibrate", "-m", tiny_folder, "--fasta", FASTA, "-o", cal, *SMALL, "--window-grid", "1",
              "--regions", "2", "--region-bp", "5"])  # fmt: skip
    out = tmp_path / "v.vcf"
    vcf = DATA / "chr20_slice.vcf"
    run_json(
        ["vep", "-m", tiny_folder, "--vcf", vcf, "--fasta", FASTA, "-o", out, *SMALL, "--calibration", cal]
    )
    with pysam.VariantFile(str(out)) as vf:
        assert "HEXAMER_RAW" in vf.header.info and "HEXAMER_PHRED" in vf.header.info
        for rec in vf:
            if rec.info["HEXAMER_STATUS"][0] == "ok" and len(rec.ref) == len(rec.alts[0]) == 1:
                assert rec.info["HEXAMER_RAW"][0] == pytest.approx(rec.info["HEXAMER_SCORE"][0])
                assert rec.info["HEXAMER_PHRED"][0] >= 0


def test_ism_vep_and_calibrate_share_their_defaults(tiny_folder, tmp_path) -> None:
    """No recipe option but the window length: one SNV scores the same through ``vep`` and ``ism``,
    and a default ``calibrate`` table fits both; a table made on 128-bp tiles is refused by name."""
    one = tmp_path / "one.vcf"
    one.write_text("##fileformat=VCFv4.2\n##contig=<ID=20>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
    ism_out, vep_out, cal = tmp_path / "ism.parquet", tmp_path / "vep.parquet", tmp_path / "cal.json"
    run_json(
        [
            "calibrate",
            "-m",
            tiny_folder,
            "--fasta",
            FASTA,
            "-o",
            cal,
            *SMALL,
            "--regions",
            "2",
            "--region-bp",
            "5",
        ]
    )
    run_json(
        [
            "ism",
            "-m",
            tiny_folder,
            "--fasta",
            FASTA,
            "-r",
            "20:60301",
            "-o",
            ism_out,
            *SMALL,
            "--calibration",
            cal,
        ]
    )
    ism_rows = pq.read_table(ism_out).to_pylist()
    snv = ism_rows[1]
    with one.open("a") as f:
        f.write(f"20\t{snv['pos']}\t.\t{snv['ref']}\t{snv['alt']}\t.\t.\t.\n")
    run_json(
        [
            "vep",
            "-m",
            tiny_folder,
            "--vcf",
            one,
            "--fasta",
            FASTA,
            "-o",
            vep_out,
            *SMALL,
            "--calibration",
            cal,
        ]
    )
    (vep_row,) = pq.read_table(vep_out).to_pylist()
    assert snv["status"] == vep_row["status"] == "ok" and snv["window_placement"] == "centred"
    assert snv["score"] == vep_row["score"] and snv["phred"] == vep_row["phred"]
    tiled = tmp_path / "tiled.json"
    run_json(["calibrate", "-m", tiny_folder, "--fasta", FASTA, "-o", tiled, *SMALL, "--window-grid", "120",
              "--regions", "2", "--region-bp", "5"])  # fmt: skip
    bad = run(
        [
            "ism",
            "-m",
            tiny_folder,
            "--fasta",
            FASTA,
            "-r",
            "20:60301",
            "-o",
            ism_out,
            *SMALL,
            "--calibration",
            tiled,
        ]
    )
    assert bad.exit_code == 2 and "window placement centred (the calibration's: grid:120" in error_message(
        bad
    )


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["-r", "20:1-10", "--vcf", "x.vcf"], "not both"),
        ([], "not both"),
        (["-r", "20:1-10", "--plot", "x.bmp"], "--plot"),
        (["-r", "20:1-10", "--flank", "-1"], "greater than or equal to 0"),
    ],
)
def test_ism_usage_errors(tmp_path, extra, needle) -> None:
    exc = usage_error(["ism", "--fasta", FASTA, "-o", tmp_path / "x.tsv", *extra])
    assert needle in str(exc) or needle in repr(exc)


def test_ism_bad_region_named(tiny_folder, tmp_path) -> None:
    result = run(
        ["ism", "-m", tiny_folder, "--fasta", FASTA, "-r", "20:500000-500010", "-o", tmp_path / "x.tsv"]
    )
    assert result.exit_code == 2 and "past the end of contig '20'" in error_message(result)
    assert not (tmp_path / "x.tsv").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["ism", "-r", "20:60301-60306", "-o", "ism.tsv"],
        ["vep", "--vcf", DATA / "chr20_slice.vcf", "-o", "v.tsv"],
    ],
)
@pytest.mark.parametrize(("text", "needle"), [(None, "no such calibration file"), ("{", "not a JSON")])
def test_unreadable_calibration_file_is_named(tmp_path, command, text, needle) -> None:
    """``--calibration`` is read before the model: a missing or broken file stops the command, naming it."""
    cal = tmp_path / "cal.json"
    if text is not None:
        cal.write_text(text)
    args = [*command[:-1], tmp_path / command[-1], "--fasta", FASTA, "-m", tmp_path / "no-model"]
    result = run([*args, "--calibration", cal])
    assert result.exit_code == 2 and needle in error_message(result) and str(cal) in error_message(result)
    assert not (tmp_path / command[-1]).exists()
