"""hexamer vep / embed / plot from the command line, on the shipped chr20 slice."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pysam

from hexamer.testing.cli import error_message, run, run_json, run_ok, usage_error

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
    run_ok([*args, "-o", str(table)])
    rows = pq.read_table(table).to_pylist()
    gridded = tmp_path / "gridded.parquet"
    run_ok([*args, "--window-grid", "200", "-o", str(gridded)])
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
    run_ok([*args, "-o", str(vcf_out)])
    with pysam.VariantFile(str(vcf_out)) as vf:
        assert "HEXAMER_SCORE" in vf.header.info
    plot = tmp_path / "hist.png"
    run_ok(["plot", "hist", str(table), "-o", str(plot), "--by", "status"])
    assert plot.stat().st_size > 1000


def test_vep_plot_and_threads(tiny_folder: Path, tmp_path: Path) -> None:
    import torch

    before = torch.get_num_threads()
    plot = tmp_path / "dist.png"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "edge_cases.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(tmp_path / "s.tsv")]
    try:
        summary = run_json([*args, "--plot", str(plot), "--threads", "1"])
    finally:
        torch.set_num_threads(before)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (tmp_path / "s.tsv").read_text().splitlines()
    assert summary["n_rows"] == len(rows) - 1 and summary["plot"] == str(plot)
    assert summary["scored_kinds"]["SNV"] == 9  # counts per variant kind
    assert sum(summary["status_counts"].values()) == summary["n_rows"]
    assert ".png" in usage_error([*args, "--plot", str(tmp_path / "dist.txt")]).format_message()


def test_counts_are_printed_as_words() -> None:
    from hexamer.cli.app import describe_counts

    assert describe_counts({"SNV": 9, "deletion": 2}) == "SNV 9, deletion 2"
    assert describe_counts({"ok": 12345}) == "ok 12,345" and describe_counts({}) == "none"


def test_vep_token_budget_is_a_setting_resume_checks(tiny_folder: Path, tmp_path: Path) -> None:
    """--token-budget reaches the engine, and resuming with another value names the one to pass."""
    from hexamer.vep.job import sidecar_dir

    out = tmp_path / "b.tsv"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "edge_cases.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(out)]
    run_ok([*args, "--token-budget", "300"])
    side = sidecar_dir(out)
    side.mkdir()  # a sidecar left by a killed run with a budget of 300
    (side / "meta.json").write_text(
        '{"version": 0, "settings": {"token_budget": 300}, "vcf": null, "fasta": null, "model": null, "output": "b.tsv"}'
    )
    again = run([*args, "--token-budget", "512", "--resume"])
    assert again.exit_code == 2
    message = error_message(again)
    assert "token_budget 300 -> 512" in message and "--token-budget 300" in message
    bad = run([*args, "--token-budget", "0"])
    assert bad.exit_code != 0


def test_vep_bad_input(tiny_folder: Path, tmp_path: Path) -> None:
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(tmp_path / "none.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "-o", str(tmp_path / "x.tsv")]
    assert "none.vcf" in usage_error(args).format_message()  # refused before the model loads


def test_embed_and_roc(tiny_folder: Path, tmp_path: Path) -> None:
    fasta = tmp_path / "seqs.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n>b\nTTTTGGGGCCCCAAAA\n>bad\nACGTX\n")
    out = tmp_path / "emb.parquet"
    run_ok(["embed", "-m", str(tiny_folder), "-i", str(fasta), "-o", str(out), "--pool", "sep"])
    table = pq.read_table(out)
    assert table.num_rows == 3  # the bad record stays, with its reason
    bad = next(r for r in table.to_pylist() if r["id"] == "bad")
    assert bad["embedding"] is None and "'X'" in bad["error"]
    labels = tmp_path / "labels.tsv"
    labels.write_text("score\tlabel\n0.1\t0\n0.9\t1\n0.4\t0\n0.8\t1\n")
    png = tmp_path / "roc.svg"
    summary = run_json(["plot", "roc", str(labels), "-o", str(png), "--label-col", "label"])
    assert summary["metric"] == "AUROC" and summary["value"] == 1.0 and png.is_file()


def test_vep_unreadable_fields_fail_one_row_each(tiny_folder: Path, tmp_path: Path) -> None:
    """One bad record is one failed row (line and field in the reason); the others are scored."""
    out = tmp_path / "u.parquet"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "unreadable_fields.vcf")]
    args += ["--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(out)]
    run_ok(args)
    rows = pq.read_table(out).to_pylist()
    assert [r["status"] for r in rows] == ["ok", "failed", "failed", "failed", "ref_mismatch", "ok"]
    assert "line 5: POS 9223372036854775808" in rows[1]["reason"]
    assert "line 7: ID" in rows[3]["reason"] and "0xff" in rows[3]["reason"]


def _vep(tiny_folder: Path, vcf: str, fasta: Path, out: str, *extra: str, stdin: bytes | None = None):
    args = ["vep", "-m", str(tiny_folder), "--vcf", vcf, "--fasta", str(fasta), "--window", "600", "-o", out]
    return run([*args, *extra], input=stdin)


def test_vep_real_saureus_vcf_against_its_ncbi_plain_gzip_fasta(tiny_folder: Path, tmp_path: Path) -> None:
    """The RN4220 VCF says NC_007795, the NCTC 8325 FASTA (plain gzip) gi|88193823|ref|NC_007795.1|:
    once every record was skipped with exit status 0; now the alias is used and noted."""
    out = tmp_path / "s.parquet"
    result = _vep(
        tiny_folder, str(DATA / "saureus_rn4220.vcf"), DATA / "saureus_nctc8325_slice.fa.gz", str(out)
    )
    assert result.exit_code == 0, result.output
    rows = pq.read_table(out).to_pylist()
    assert [(r["chrom"], r["pos"], r["status"]) for r in rows] == [
        ("NC_007795", 22181, "ok"),
        ("NC_007795", 33961, "ok"),
        ("NC_007795", 47652, "ok"),
    ]


def test_vep_mostly_missing_contigs_write_everything_then_exit_1(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.tsv"
    result = _vep(tiny_folder, str(DATA / "saureus_rn4220.vcf"), DATA / "chr20_slice.fa.gz", str(out))
    assert result.exit_code == 1, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all("\tskipped\t" in line for line in lines[1:])  # complete output
    # a few missing contigs among found ones is no error
    result = _vep(tiny_folder, str(DATA / "edge_cases.vcf"), DATA / "chr20_slice.fa.gz", str(out))
    assert result.exit_code == 0, result.output


def test_vep_rename_chrs(tiny_folder: Path, tmp_path: Path) -> None:
    """bcftools --rename-chrs: two columns, old (VCF) then new (FASTA)."""
    import gzip

    text = gzip.decompress((DATA / "saureus_nctc8325_slice.fa.gz").read_bytes()).decode()
    fasta = tmp_path / "staph.fa"
    fasta.write_text(">staph\n" + text.split("\n", 1)[1])
    out = tmp_path / "s.tsv"
    vcf = str(DATA / "saureus_rn4220.vcf")
    assert _vep(tiny_folder, vcf, fasta, str(out)).exit_code == 1  # no alias relates the names
    names = tmp_path / "names.txt"
    names.write_text("NC_007795 staph\n")
    result = _vep(tiny_folder, vcf, fasta, str(out), "--rename-chrs", str(names))
    assert result.exit_code == 0, result.output
    assert [line.split("\t")[10] for line in out.read_text().splitlines()[1:]] == ["ok"] * 3
    names.write_text("NC_007795\n")
    result = _vep(tiny_folder, vcf, fasta, str(out), "--rename-chrs", str(names))
    assert result.exit_code == 2


def test_vep_stdin_to_stdout(tiny_folder: Path, tmp_path: Path) -> None:
    """`--vcf -` reads standard input and `-o -` writes the annotated VCF to standard output."""
    vcf = (DATA / "chr20_slice.vcf").read_bytes()
    result = _vep(tiny_folder, "-", DATA / "chr20_slice.fa.gz", "-", stdin=vcf)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("##fileformat=VCF")
    body = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert len(body) == 9 and all("HEXAMER_STATUS=" in line for line in body)
    result = _vep(tiny_folder, "-", DATA / "chr20_slice.fa.gz", "-", "--resume", stdin=vcf)
    assert result.exit_code == 2


def test_plot_roc_string_labels_need_positive(tmp_path: Path) -> None:
    from sklearn.metrics import average_precision_score, roc_auc_score

    labels = tmp_path / "labels.tsv"
    rows = [(0.1, "benign"), (0.9, "pathogenic"), (0.4, "benign"), (0.3, "pathogenic"), (0.8, "benign")]
    labels.write_text("score\tclinvar\n" + "".join(f"{s}\t{c}\n" for s, c in rows))
    args = ["plot", "roc", str(labels), "-o", str(tmp_path / "roc.png"), "--label-col", "clinvar"]
    failed = run(args)
    assert failed.exit_code == 2 and "--positive" in error_message(failed)
    summary = run_json([*args, "--positive", "pathogenic"])
    y = [c == "pathogenic" for _, c in rows]
    assert summary["metric"] == "AUROC" and summary["positive"] == "pathogenic"
    assert abs(summary["value"] - roc_auc_score(y, [s for s, _ in rows])) < 1e-12
    negated = run_json([*args, "--positive", "pathogenic", "--negate"])
    assert abs(negated["value"] - roc_auc_score(y, [-s for s, _ in rows])) < 1e-12
    pr = run_json(["plot", "pr", *args[2:], "--positive", "pathogenic"])
    assert pr["metric"] == "average precision"
    assert abs(pr["value"] - average_precision_score(y, [s for s, _ in rows])) < 1e-12
    missing = run([*args, "--positive", "likely_pathogenic"])
    assert missing.exit_code == 2 and "likely_pathogenic" in error_message(missing)


def test_plot_reads_a_table_from_stdin_with_format_and_writes_png_to_stdout(tmp_path: Path) -> None:
    """`hexamer plot roc - --format F` reads standard input; `-o -` writes the PNG to stdout."""
    import pyarrow as pa
    from sklearn.metrics import roc_auc_score

    rows = [{"score": s, "label": y} for s, y in [(0.1, 0), (0.9, 1), (0.4, 0), (0.3, 1), (0.8, 0)]]
    auc = roc_auc_score([r["label"] for r in rows], [r["score"] for r in rows])
    jsonl = "".join(json.dumps(r) + "\n" for r in rows)
    png = tmp_path / "roc.png"
    summary = run_json(
        ["plot", "roc", "-", "--format", "jsonl", "-o", png, "--label-col", "label"], input=jsonl
    )
    assert abs(summary["value"] - auc) < 1e-12 and png.read_bytes().startswith(b"\x89PNG")
    parquet = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    summary = run_json(
        ["plot", "roc", "-", "--format", "parquet", "-o", png, "--label-col", "label"],
        input=parquet.read_bytes(),
    )
    assert abs(summary["value"] - auc) < 1e-12
    tsv = tmp_path / "t.tsv"
    tsv.write_text("score\tlabel\n" + "".join(f"{r['score']}\t{r['label']}\n" for r in rows))
    image = run(["plot", "hist", str(tsv), "-o", "-"])
    assert image.exit_code == 0, image.output
    assert image.stdout_bytes.startswith(b"\x89PNG") and "standard" not in image.stdout_bytes[:8].decode(
        "latin-1"
    )
    needs_format = usage_error(["plot", "hist", "-", "-o", png])
    assert "--format" in needs_format.format_message()
    both = usage_error(["plot", "hist", str(tsv), "-o", "-", "--json"])
    assert "--json" in both.format_message()


def test_embed_writes_parquet_to_stdout(tiny_folder: Path) -> None:
    import io

    result = run(["embed", "-m", tiny_folder, "-i", "-", "-o", "-"], input=">a\nACGTACGTTGCA\n>b\nTTTTGGGG\n")
    assert result.exit_code == 0, result.output
    table = pq.read_table(io.BytesIO(result.stdout_bytes))
    assert table.column("id").to_pylist() == ["a", "b"] and table.column("embedding")[0].as_py()


def test_embed_on_ray_refuses_stdout_before_any_work(tmp_path: Path) -> None:
    """`--ray` writes the embeddings to a file (its shards kept for --resume): `-o -` is refused."""
    fasta = tmp_path / "s.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n")
    message = usage_error(["embed", "-i", str(fasta), "-o", "-", "--ray", "local"]).format_message()
    assert "--ray" in message and "--out FILE" in message


def test_file_options_that_cannot_be_a_stream_refuse_dash_with_the_reason(tmp_path: Path) -> None:
    """Folders, indexed references, images beside another output, and files read by name say why
    '-' cannot be used, before any work."""
    vcf = str(DATA / "chr20_slice.vcf")
    cases = [
        (["vep", "--vcf", vcf, "--fasta", "-", "-o", tmp_path / "o.tsv"], "read by position"),
        (
            [
                "vep",
                "--vcf",
                vcf,
                "--fasta",
                DATA / "chr20_slice.fa.gz",
                "-o",
                tmp_path / "o.tsv",
                "--plot",
                "-",
            ],
            "image",
        ),
        (["demo", "-o", "-"], "folder"),
        (["quantize", "-", tmp_path / "q"], "folder"),
        (["quantize", tmp_path, "-"], "folder"),
        (["build-niah", "-o", "-"], "folder"),
        (["build-niah", "-o", tmp_path / "n", "--fasta", "-"], "file name"),
        (["eval", "--task", "x", "--data", "-"], "by name"),
        (["eval", "--data-root", "-"], "folder"),
        (["eval", "--data-root", tmp_path, "-o", "-"], "--report -"),
        (["eval", "--data-root", tmp_path, "--cache-dir", "-"], "folder"),
        (["eval", "--data-root", tmp_path, "--hg38", "-"], "chromosome"),
        (["bench", "tokenizer", "--plot", "-"], "image"),
        (["bench", "all", "-o", "-"], "folder"),
        (["bench", "vep", "--fasta", "-"], "read by position"),
        (["bench", "vep", "--vcf", "-"], "every timed round"),
        (["bench", "scaleout", "--fasta", "-"], "read by position"),
        (["track", "--fasta", "-", "-o", tmp_path / "t"], "read by position"),
        (["ism", "--fasta", "-", "-r", "20:1-2", "-o", tmp_path / "i.tsv"], "read by position"),
        (["calibrate", "--fasta", "-", "-o", tmp_path / "c.json"], "read by position"),
        (["bench", "ism", "--fasta", "-", "--region", "20:1-2"], "read by position"),
        (["track", "--fasta", DATA / "chr20_slice.fa.gz", "-o", "-"], "folder"),
        (["bench", "quant", "--gguf", "-"], "GGUF"),
        (["bench", "serve", "--plot", "-"], "image"),
        (["bench", "spec", "--plot", "-"], "image"),
    ]
    for args, why in cases:
        message = usage_error([str(a) for a in args]).format_message()
        assert "'-' (standard input/output) cannot be used here" in message and why in message, (
            args,
            message,
        )


def test_plot_names_a_malformed_table_and_a_name_without_format(tmp_path: Path) -> None:
    """A table that does not parse is 'cannot read' (not a usage error); an extension it cannot
    tell is a usage error naming TABLE."""
    bad = tmp_path / "bad.csv"
    bad.write_text("score,label\n0.1,0\n0.2\n")
    failed = run(["plot", "hist", str(bad), "-o", str(tmp_path / "h.png")])
    assert failed.exit_code != 0 and "cannot read" in error_message(failed)
    unknown = usage_error(["plot", "hist", str(tmp_path / "t.xyz"), "-o", str(tmp_path / "h.png")])
    assert "cannot tell the table format" in unknown.format_message()


def test_vep_alt_equal_to_ref_is_skipped_and_counted(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "same.jsonl"
    args = ["vep", "-m", str(tiny_folder), "--vcf", str(DATA / "ref_equals_alt.vcf")]
    summary = run_json([*args, "--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(out)])
    assert summary["status_counts"] == {"ok": 4, "skipped": 1}
    assert summary["reason_counts"] == {"skipped": {"ALT equals REF": 1}}
    last = json.loads(out.read_text().splitlines()[-1])
    assert (last["alt"], last["status"], last["score"]) == ("A", "skipped", None)


def test_vep_info_field_that_is_not_utf8_fails_its_row(tiny_folder: Path, tmp_path: Path) -> None:
    """--info-fields NOTE on a Latin-1 value used to leave the cell empty, the row as scored."""
    out = tmp_path / "u.jsonl"
    args = [
        "vep",
        "-m",
        str(tiny_folder),
        "--vcf",
        str(DATA / "unreadable_fields.vcf"),
        "--info-fields",
        "NOTE",
    ]
    summary = run_json([*args, "--fasta", str(DATA / "chr20_slice.fa.gz"), "--window", "600", "-o", str(out)])
    assert summary["status_counts"] == {"ok": 2, "failed": 4}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    bad = next(r for r in rows if r["id"] == "bad_info")
    assert bad["status"] == "failed" and "INFO field NOTE holds byte 0xe9" in bad["reason"]


def _nan_folder(tiny_folder: Path, tmp_path: Path) -> Path:
    import shutil

    from hexamer.testing import poison_weights

    folder = tmp_path / "nan-model"
    shutil.copytree(tiny_folder, folder)
    return poison_weights(folder, float("nan"), "model.norm.weight")


def test_nan_weights_stop_every_command_before_any_work(tiny_folder: Path, tmp_path: Path) -> None:
    bad = _nan_folder(tiny_folder, tmp_path)
    (tmp_path / "s.fa").write_text(">a\nACGTACGTTGCA\n")
    fasta = DATA / "chr20_slice.fa.gz"
    commands = [
        ["vep", "--vcf", DATA / "chr20_slice.vcf", "--fasta", fasta, "-o", tmp_path / "v.tsv"],
        ["embed", "-i", tmp_path / "s.fa", "-o", tmp_path / "e.parquet"],
        ["ism", "--fasta", fasta, "--region", "20:60301-60310", "-o", tmp_path / "i.tsv"],
        [
            "track",
            "--fasta",
            fasta,
            "--region",
            "20:60301-60400",
            "-o",
            tmp_path / "t",
            "--format",
            "bedgraph",
        ],
        ["serve", "--port", "0"],
    ]
    for args in commands:
        result = run([args[0], "-m" if args[0] != "serve" else "--model", bad, *args[1:]])
        assert result.exit_code == 2
        assert error_message(result).startswith(
            f"tensor 'model.norm.weight' in {bad / 'model.safetensors'} has "
        )
        assert not list(tmp_path.glob("[veit]*"))  # nothing written


def test_non_finite_outputs_are_failed_rows_of_vep_and_embed(overflow_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "v.tsv"
    args = [
        "vep",
        "-m",
        overflow_folder,
        "--vcf",
        DATA / "chr20_slice.vcf",
        "--fasta",
        DATA / "chr20_slice.fa.gz",
    ]
    result = run([*args, "--window", "600", "-o", out])
    assert result.exit_code == 1 and "no variant was scored" in error_message(result)
    rows = list(csv.DictReader(out.open(), delimiter="\t"))
    assert rows and all(r["score"] == "" and r["status"] in ("failed", "skipped") for r in rows)
    assert any("non-finite score" in r["reason"] for r in rows)
    fasta = tmp_path / "s.fa"
    fasta.write_text(">a\nACGTACGTTGCA\n>b\nTTTTGGGG\n")
    emb = tmp_path / "e.parquet"
    result = run(["embed", "-m", overflow_folder, "-i", fasta, "-o", emb])
    assert result.exit_code == 1 and "no record was embedded" in error_message(result)
    table = pq.read_table(emb).to_pylist()
    assert [r["embedding"] for r in table] == [None, None]
    assert all(r["error"].startswith("non-finite embedding") for r in table)
