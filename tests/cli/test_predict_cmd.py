"""``hexamer predict`` through the CLI: tables with every record, variant effects as hexamer vep
writes them, one-line errors before any model loads."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hexamer.finetune.apply import Predictor, predict_records
from hexamer.testing.cli import error_message, run, run_json, run_ok, usage_error
from hexamer.testing.heads import build_head_folder

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_head_folder(tmp_path_factory.mktemp("heads") / "reg")


def _tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_predict_sequences_table(head: Path, tmp_path: Path) -> None:
    fa = tmp_path / "in.fa"
    fa.write_text(">a\nACGTACGTAAGGCTAGCTAGGATCGA\n>bad\nACGTXX\n>c\nGGGCCCTTTAAACGCG\n")
    out = tmp_path / "pred.tsv"
    summary = run_json(["predict", "-m", head, "-i", fa, "-o", out])
    assert summary["status_counts"] == {"ok": 2, "skipped": 1} and summary["columns"] == ["activity"]
    rows = _tsv(out)
    assert list(rows[0]) == ["record", "id", "status", "error", "activity"]
    assert [r["id"] for r in rows] == ["a", "bad", "c"] and rows[1]["status"] == "skipped"
    want = [r for chunk in predict_records(Predictor.load(head), fa) for r in chunk]
    assert [float(r["activity"]) for r in rows if r["status"] == "ok"] == pytest.approx(
        [r["activity"] for r in want if r["status"] == "ok"], rel=1e-6
    )


def test_predict_bed_and_vcf(head: Path, tmp_path: Path) -> None:
    bed = tmp_path / "r.bed"
    bed.write_text("20\t62000\t62060\tplus\t0\t+\n20\t62000\t62060\tminus\t0\t-\n")
    out = tmp_path / "regions.parquet"
    assert run_json(["predict", "-m", head, "--bed", bed, "--fasta", FASTA, "-o", out])["status_counts"] == {
        "ok": 2
    }
    vout = tmp_path / "eff.tsv"
    summary = run_json(
        ["predict", "-m", head, "--vcf", DATA / "edge_cases.vcf", "--fasta", FASTA, "-o", vout]
    )
    rows = _tsv(vout)
    assert summary["n_rows"] == len(rows) == 22 and "activity" in rows[0]
    assert summary["status_counts"] == {"ok": 13, "ref_mismatch": 2, "skipped": 7}


def test_errors_before_any_load(head: Path, tiny_folder: Path, tmp_path: Path) -> None:
    fa = tmp_path / "in.fa"
    fa.write_text(">a\nACGT\n")
    result = run(["predict", "-m", tiny_folder, "-i", fa, "-o", tmp_path / "p.tsv"])
    assert result.exit_code == 2
    assert "is a language model folder, not a fine-tuned head folder" in error_message(result)
    assert "exactly one of --input, --bed and --vcf" in str(
        usage_error(["predict", "-m", head, "-i", fa, "--vcf", fa, "-o", tmp_path / "p.tsv"])
    )
    assert "--fasta" in str(usage_error(["predict", "-m", head, "--bed", fa, "-o", tmp_path / "p.tsv"]))
    assert "--resume is for --vcf" in str(
        usage_error(["predict", "-m", head, "-i", fa, "-o", tmp_path / "p.tsv", "--resume"])
    )
    assert "at least 30 bp" in str(
        usage_error(
            ["predict", "-m", head, "--vcf", fa, "--fasta", FASTA, "-o", tmp_path / "p.tsv", "--window", "10"]
        )
    )
    assert "supported extensions" in str(
        usage_error(["predict", "-m", head, "-i", fa, "-o", tmp_path / "p.vcf"])
    )

    assert "standard input is for --input and --vcf" in str(
        usage_error(["predict", "-m", head, "--bed", "-", "--fasta", FASTA, "-o", tmp_path / "p.tsv"])
    )
    assert "--ray scales out --vcf jobs" in str(
        usage_error(["predict", "-m", head, "-i", fa, "-o", tmp_path / "p.tsv", "--ray", "auto"])
    )


def test_lm_commands_name_a_head_folder(head: Path) -> None:
    result = run(["score", "-m", head, "ACGTACGTACGT"])
    assert result.exit_code == 2 and "fine-tuned sequence-classification head folder" in error_message(result)
    vcf = DATA / "chr20_slice.vcf"
    result = run(["vep", "-m", head, "--vcf", vcf, "--fasta", FASTA, "-o", head.parent / "x.tsv"])
    assert result.exit_code == 2 and "fine-tuned sequence-classification head folder" in error_message(result)


def test_serve_names_a_head_folder(head: Path) -> None:
    result = run(["serve", "-m", head])
    assert result.exit_code == 2 and f"add --head {head}" in error_message(result)


def _small_vcf(path: Path, contig: str = "20") -> Path:
    path.write_text(
        "##fileformat=VCFv4.2\n"
        '##INFO=<ID=AF,Number=A,Type=Float,Description="Allele frequency">\n'
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        f"{contig}\t62000\ta\tC\tA,G\t.\tPASS\tAF=0.1,0.2\n"
        f"{contig}\t62010\tb\tG\tT\t.\tPASS\tAF=0.3\n"
        f"{contig}\t62100\tc\tT\tC\t.\tPASS\t.\n"
    )
    return path


def test_vcf_info_fields_and_plot(head: Path, tmp_path: Path) -> None:
    out, figure = tmp_path / "eff.tsv", tmp_path / "eff.png"
    summary = run_json(
        [
            "predict",
            "-m",
            head,
            "--vcf",
            _small_vcf(tmp_path / "v.vcf"),
            "--fasta",
            FASTA,
            "-o",
            out,
            "--info-fields",
            "AF",
            "--plot",
            figure,
        ]
    )
    rows = _tsv(out)
    assert [float(r["info_AF"] or "nan") for r in rows] == pytest.approx(
        [0.1, 0.2, 0.3, float("nan")], nan_ok=True
    )
    assert summary["status_counts"] == {"ok": 4} and summary["plot"] == str(figure)
    assert figure.stat().st_size > 0
    assert [float(r["score"]) for r in rows] == pytest.approx([float(r["activity"]) for r in rows])


def test_vcf_rename_chrs(head: Path, tmp_path: Path) -> None:
    vcf = _small_vcf(tmp_path / "chr.vcf", contig="chrom20")
    renames = tmp_path / "renames.txt"
    renames.write_text("chrom20 20\n")
    plain = run(["predict", "-m", head, "--vcf", vcf, "--fasta", FASTA, "-o", tmp_path / "a.tsv"])
    assert plain.exit_code == 1  # without the renames every contig is absent: nothing predicted
    assert {r["status"] for r in _tsv(tmp_path / "a.tsv")} == {"skipped"}
    renamed = run_json(
        [
            "predict",
            "-m",
            head,
            "--vcf",
            vcf,
            "--fasta",
            FASTA,
            "-o",
            tmp_path / "b.tsv",
            "--rename-chrs",
            renames,
        ]
    )
    assert renamed["status_counts"] == {"ok": 4}
    want = _tsv(tmp_path / "b.tsv")
    same = run_json(
        [
            "predict",
            "-m",
            head,
            "--vcf",
            _small_vcf(tmp_path / "v.vcf"),
            "--fasta",
            FASTA,
            "-o",
            tmp_path / "c.tsv",
        ]
    )
    assert same["status_counts"] == {"ok": 4}
    assert [r["activity"] for r in _tsv(tmp_path / "c.tsv")] == [r["activity"] for r in want]


def test_vcf_only_options_checked_before_load(head: Path, tmp_path: Path) -> None:
    fa = tmp_path / "in.fa"
    fa.write_text(">a\nACGT\n")
    vcf = _small_vcf(tmp_path / "v.vcf")
    for option, value in (("--info-fields", "AF"), ("--plot", tmp_path / "p.png"), ("--rename-chrs", fa)):
        assert f"{option} is for --vcf jobs" in str(
            usage_error(["predict", "-m", head, "-i", fa, "-o", tmp_path / "p.tsv", option, value])
        )
    base = ["predict", "-m", head, "--vcf", vcf, "--fasta", FASTA, "-o", tmp_path / "p.tsv"]
    assert ".png, .svg or .pdf" in str(usage_error([*base, "--plot", tmp_path / "p.txt"]))
    bad = tmp_path / "bad_renames.txt"
    bad.write_text("one two three\n")
    assert "bad_renames.txt" in str(usage_error([*base, "--rename-chrs", bad]))
    multi = build_head_folder(tmp_path / "multi", targets=("a", "b"), zscore=((0.0, 0.0), (1.0, 1.0)))
    assert "no single score to plot" in str(
        usage_error(["predict", "-m", multi, "--vcf", vcf, "--fasta", FASTA, "-o", tmp_path / "m.tsv",
                     "--plot", tmp_path / "m.png"])
    )  # fmt: skip


def test_vcf_from_stdin_to_stdout(head: Path, tmp_path: Path) -> None:
    vcf = _small_vcf(tmp_path / "v.vcf")
    result = run_ok(
        ["predict", "-m", head, "--vcf", "-", "--fasta", FASTA, "-o", "-", "--json"], input=vcf.read_text()
    )
    records = [line.split("\t") for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert len(records) == 3 and all("HEXAMER_activity=" in r[7] for r in records)
    summary = json.loads(result.stderr.strip().splitlines()[-1])  # stdout carries the VCF itself
    assert summary["output"] == "standard output" and summary["status_counts"] == {"ok": 4}
    file_out = tmp_path / "eff.vcf"
    run_ok(["predict", "-m", head, "--vcf", vcf, "--fasta", FASTA, "-o", file_out])
    body = [line for line in file_out.read_text().splitlines() if not line.startswith("#")]
    assert body == [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    fa = tmp_path / "in.fa"
    fa.write_text(">a\nACGT\n")
    assert "-o - writes the VCF of a --vcf job" in str(
        usage_error(["predict", "-m", head, "-i", fa, "-o", "-"])
    )
    assert "--resume needs a VCF file" in str(
        usage_error(
            ["predict", "-m", head, "--vcf", "-", "--fasta", FASTA, "-o", tmp_path / "r.tsv", "--resume"]
        )
    )
