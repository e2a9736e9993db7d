"""hexamer generate / score: files in, files out, bad records reported while the rest is kept."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer import Carbon
from hexamer.testing.cli import error_message, run, run_json, run_ok, usage_error

FASTA = (
    """>good1 first
ACGTACGTACGTAAC
>bad_char
ACGTXACGT
>good2
TTGACATTGACAGG
>empty
>good1
ACGT
>long
"""
    + "ACGT" * 4000
    + "\n"
)


@pytest.fixture
def fasta(tmp_path: Path) -> Path:
    path = tmp_path / "in.fa"
    path.write_text(FASTA)
    return path


def test_generate_table_keeps_every_record(tiny_folder: Path, fasta: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen.tsv"
    run_ok(
        [
            "generate",
            "-m",
            str(tiny_folder),
            "-i",
            str(fasta),
            "-o",
            str(out),
            "--max-bp",
            "20",
            "--seed",
            "3",
        ]
    )
    with out.open() as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["id"] for r in rows] == ["good1", "bad_char", "good2", "empty", "good1", "long"]
    assert [r["status"] for r in rows] == ["ok", "skipped", "ok", "skipped", "skipped", "failed"]
    assert all(len(r["sequence"]) == 20 for r in rows if r["status"] == "ok")
    assert "exceeds the model's context" in rows[5]["error"]
    # reproducible and identical to the Python API with seed = seed + record index
    carbon = Carbon.from_pretrained(tiny_folder)
    expected = carbon.generate("TTGACATTGACAGG", max_bp=20, seed=3 + 2).sequence
    assert rows[2]["sequence"] == expected


def test_generate_fasta_and_parquet(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "gen.fa.gz"
    run_ok(
        [
            "generate",
            "-m",
            str(tiny_folder),
            "ACGTACGT",
            "TTTTTTGG",
            "-o",
            str(out),
            "--max-bp",
            "13",
            "--temperature",
            "0",
            "--mode",
            "token",
        ]
    )
    with gzip.open(out, "rt") as f:
        text = f.read().split()
    assert text[0] == ">seq1" and len(text[1]) == 13
    pq_out = tmp_path / "gen.parquet"
    run_ok(
        ["generate", "-m", str(tiny_folder), "ACGTACGT", "-o", str(pq_out), "--max-bp", "7", "--mask", "ATG"]
    )
    table = pq.read_table(pq_out).to_pylist()
    assert table[0]["sequence"].startswith("ATG") and table[0]["n_bp"] == 7


def test_generate_stdout_and_bad_options(tiny_folder: Path) -> None:
    result = run_ok(["generate", "-m", str(tiny_folder), "ACGTAC", "--max-bp", "6", "--seed", "1"])
    assert result.stdout.splitlines()[0] == ">seq1"  # FASTA on stdout is data, not terminal text
    dash = run(["generate", "-m", str(tiny_folder), "ACGTAC", "--max-bp", "6", "-o", "-"])
    assert dash.exit_code == 0 and dash.stdout.splitlines()[0] == ">seq1"
    bad = usage_error(["generate", "-m", str(tiny_folder), "ACGTAC", "--mode", "codon"])
    assert "codon" in bad.format_message()
    bad = usage_error(["generate", "-m", str(tiny_folder), "ACGTAC", "--mask", "NNZ"])
    assert "not an IUPAC" in bad.format_message()
    none = run(["generate", "-m", str(tiny_folder)])
    assert none.exit_code != 0


def test_score_parquet_with_per_base(tiny_folder: Path, fasta: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.parquet"
    run_ok(["score", "-m", str(tiny_folder), "-i", str(fasta), "-o", str(out), "--per-base"])
    rows = pq.read_table(out).to_pylist()
    assert [r["status"] for r in rows] == ["ok", "skipped", "ok", "skipped", "skipped", "failed"]
    carbon = Carbon.from_pretrained(tiny_folder)
    ref = carbon.score("ACGTACGTACGTAAC")
    assert rows[0]["mean_logprob"] == pytest.approx(ref.mean, abs=1e-5)
    assert len(rows[0]["per_base_logprob"]) == 15
    assert rows[0]["n_scored"] == 15


def test_score_stdout_tsv(tiny_folder: Path) -> None:
    result = run_ok(["score", "-m", str(tiny_folder), "ACGTACNNNNNNACG", "--method", "exact"])
    header, line = result.stdout.strip().splitlines()[:2]
    row = dict(zip(header.split("\t"), line.split("\t"), strict=True))
    assert row["n_oov_bases"] == "6" and row["n_scored"] == "9" and row["status"] == "ok"
    bad = run(["score", "-m", str(tiny_folder), "ACGT", "-o", "x.fa"])
    assert bad.exit_code != 0


def test_missing_input_file(tiny_folder: Path, tmp_path: Path) -> None:
    result = run(["score", "-m", str(tiny_folder), "-i", str(tmp_path / "nope.fa")])
    assert result.exit_code == 2
    assert "nope.fa" in error_message(result)


def test_score_and_generate_read_stdin_and_write_stdout_with_dash(tiny_folder: Path) -> None:
    fasta = ">a\nACGTACGTACGTAAAA\n>b\nGGGGCCCCAAAATTTT\n"
    result = run_ok(["score", "-m", str(tiny_folder), "-i", "-", "-o", "-"], input=fasta)
    table = [line.split("\t") for line in result.stdout.splitlines() if "\t" in line]
    assert table[0][:2] == ["id", "status"] and [row[:2] for row in table[1:]] == [["a", "ok"], ["b", "ok"]]
    args = ["generate", "-m", str(tiny_folder), "-i", "-", "-o", "-", "--max-bp", "12", "--seed", "1"]
    result = run_ok(args, input=">p\nACGTACGTACGT\n")
    lines = [line for line in result.stdout.splitlines() if line.startswith(">") or set(line) <= set("ACGT")]
    assert lines[-2] == ">p" and len(lines[-1]) == 12


def test_json_summaries_count_every_record(tiny_folder: Path, fasta: Path, tmp_path: Path) -> None:
    args = ["-m", str(tiny_folder), "-i", str(fasta), "-o"]
    gen = run_json(["generate", *args, str(tmp_path / "g.tsv"), "--max-bp", "6", "--seed", "0"])
    assert gen["n_records"] == 6 and gen["status_counts"] == {"ok": 2, "skipped": 3, "failed": 1}
    assert gen["n_bp"] == 12 and gen["speculative"] is None
    scores = run_json(["score", *args, str(tmp_path / "s.tsv")])
    assert scores["status_counts"] == {"ok": 2, "skipped": 3, "failed": 1}
    assert "--out" in usage_error(["score", "-m", str(tiny_folder), "ACGT", "--json"]).format_message()


def test_generate_sampling_options_reach_the_engine(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.tsv"
    args = ["generate", "-m", str(tiny_folder), "ACGTAC", "-o", str(out), "--max-bp", "12", "--seed", "2"]
    run_json([*args, "--mode", "token", "--top-k", "3", "--min-p", "0.1", "--repetition-penalty", "1.5"])
    with out.open() as f:
        got = next(csv.DictReader(f, delimiter="\t"))["sequence"]
    want = Carbon.from_pretrained(tiny_folder).generate(
        "ACGTAC", max_bp=12, seed=2, mode="token", top_k=3, min_p=0.1, repetition_penalty=1.5
    )
    assert got == want.sequence
    assert "mode='token'" in usage_error([*args, "--top-k", "3"]).format_message()  # bp mode refuses it


@pytest.mark.parametrize("suffix", ["jsonl", "tsv", "csv", "parquet"])
def test_score_all_n_writes_null_not_nan(tiny_folder: Path, tmp_path: Path, suffix: str) -> None:
    fa = tmp_path / "in.fa"
    fa.write_text(">n\nNNNNNNNNNNNN\n>some\nACGTACNNNNNN\n")
    out = tmp_path / f"scores.{suffix}"
    args = ["score", "-m", str(tiny_folder), "-i", str(fa), "-o", str(out), "--per-base"]
    run_ok(args)
    if suffix == "jsonl":
        text = out.read_text()
        assert "NaN" not in text
        rows = [json.loads(line) for line in text.splitlines()]  # strict JSON parses it
        assert rows[1]["per_base_logprob"][6:] == [None] * 6
    elif suffix == "parquet":
        rows = pq.read_table(out).to_pylist()
    else:
        with out.open() as f:
            rows = list(csv.DictReader(f, delimiter="\t" if suffix == "tsv" else ","))
    assert rows[0]["status"] == "skipped" and "<oov>" in rows[0]["error"]
    assert rows[0]["mean_logprob"] in (None, "")
    assert rows[1]["status"] == "ok"


def test_positional_and_fasta_sequences_are_checked_alike(tiny_folder: Path, tmp_path: Path) -> None:
    seqs = ["ACGTACGTACGT", "ACGT-ACGT", "ACGTRYACGTAC"]
    fa = tmp_path / "in.fa"
    fa.write_text("".join(f">seq{i + 1}\n{s}\n" for i, s in enumerate(seqs)))
    by_arg, by_file = tmp_path / "a.jsonl", tmp_path / "f.jsonl"
    assert run(["score", "-m", str(tiny_folder), *seqs, "-o", str(by_arg)]).exit_code == 0
    assert run(["score", "-m", str(tiny_folder), "-i", str(fa), "-o", str(by_file)]).exit_code == 0
    assert by_arg.read_text() == by_file.read_text()
    assert [r.split('"status": ')[1][:9] for r in by_arg.read_text().splitlines()] == [
        '"ok", "er',
        '"skipped"',
        '"ok", "er',
    ]


def test_count_records_gives_the_progress_total(fasta: Path, tmp_path: Path) -> None:
    from hexamer.cli.sequence_jobs import count_records

    assert count_records(["ACGT", "TTGA"], None) == 2
    assert count_records(None, fasta) == 6  # bad records count: they are rows too
    assert count_records(None, Path("-")) is None  # standard input cannot be read twice
    assert count_records(None, tmp_path / "missing.fa") is None  # the real pass reports it


@pytest.mark.parametrize("command", ["score", "generate"])
def test_a_job_with_no_ok_record_exits_1_after_writing_everything(
    tiny_folder: Path, tmp_path: Path, command: str
) -> None:
    fa = tmp_path / "in.fa"
    fa.write_text(">bad\nACGTXACGT\n>empty\n>long\n" + "ACGT" * 4000 + "\n")
    out = tmp_path / "out.jsonl"
    extra = ["--max-bp", "6"] if command == "generate" else []
    result = run([command, "-m", tiny_folder, "-i", fa, "-o", out, *extra, "--json"])
    assert result.exit_code == 1
    summary = json.loads(result.stdout.strip().splitlines()[-1])  # the summary still comes first
    assert summary["status_counts"] == {"skipped": 2, "failed": 1}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["skipped", "skipped", "failed"]  # the whole output
    assert "no record was" in error_message(result) and "skipped 2" in error_message(result)
    # one ok record among bad ones is a success
    fa.write_text(">bad\nACGTXACGT\n>good\nACGTACGTACGT\n")
    assert run([command, "-m", tiny_folder, "-i", fa, "-o", out]).exit_code == 0


def test_score_to_stdout_with_no_ok_record_exits_1(tiny_folder: Path) -> None:
    result = run(["score", "-m", tiny_folder, "NNNNNNNNNNNN"])
    assert result.exit_code == 1
    header, line = result.stdout.strip().splitlines()[:2]
    assert dict(zip(header.split("\t"), line.split("\t"), strict=True))["status"] == "skipped"
    assert "no record was scored" in error_message(result)


def test_generate_n_samples_stop_and_logprobs_match_the_python_api(
    tiny_folder: Path, fasta: Path, tmp_path: Path
) -> None:
    out = tmp_path / "g.parquet"
    args = ["generate", "-m", tiny_folder, "-i", fasta, "-o", out, "--max-bp", "30", "--seed", "5"]
    summary = run_json([*args, "--n", "3", "--stop", "ta", "--stop", "GGG", "--logprobs"])
    assert summary["n_records"] == 6 and summary["n_samples"] == 3
    assert summary["status_counts"] == {"ok": 2, "skipped": 3, "failed": 1}  # per input record
    rows = pq.read_table(out).to_pylist()
    # every record has its 3 sample rows, bad ones included (with their status)
    assert [(r["id"], r["sample"]) for r in rows] == [
        (ident, j) for ident in ("good1", "bad_char", "good2", "empty", "good1", "long") for j in range(3)
    ]
    assert [r["status"] for r in rows[3:6]] == ["skipped"] * 3 and rows[3]["logprobs"] == []
    # record i, sample j: seed 5 + i * 3 + j, as Carbon.generate(n=3, seed=...) gives prompt by prompt
    carbon = Carbon.from_pretrained(tiny_folder)
    want = carbon.generate(
        ["ACGTACGTACGTAAC", "TTGACATTGACAGG"],
        max_bp=30,
        n=3,
        seed=[5, 5 + 2 * 3],
        stop=["TA", "GGG"],
        logprobs=True,
    )
    got = [r for r in rows if r["status"] == "ok"]
    assert [r["sequence"] for r in got] == [g.sequence for g in want]
    assert [r["finish_reason"] for r in got] == [g.finish_reason for g in want]
    for row, gen in zip(got, want, strict=True):
        assert "TA" not in row["sequence"] and "GGG" not in row["sequence"]
        assert row["logprobs"] == pytest.approx(gen.logprobs.tolist(), abs=1e-6)
        assert len(row["logprobs"]) == row["n_bp"]  # bp mode: one per new base
    assert "stop" in {r["finish_reason"] for r in got}
    assert summary["n_bp"] == sum(r["n_bp"] for r in got)  # the bases written, after the cuts


def test_generate_n_samples_in_fasta_are_named_id_j(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.fa"
    run_json(
        ["generate", "-m", tiny_folder, "ACGTACGT", "-o", out, "--max-bp", "12", "--n", "2", "--seed", "0"]
    )
    text = out.read_text().split()
    assert text[0::2] == [">seq1_0", ">seq1_1"]
    want = Carbon.from_pretrained(tiny_folder).generate("ACGTACGT", max_bp=12, n=2, seed=0)
    assert text[1::2] == [g.sequence for g in want]


def test_generate_n_stop_and_logprobs_are_checked_before_the_model_loads(tiny_folder: Path) -> None:
    args = ["generate", "-m", tiny_folder, "ACGTAC", "--max-bp", "6"]
    for bad, bound in (("0", "1"), ("100000", "1024")):
        message = usage_error([*args, "--n", bad]).format_message()
        assert "'--n'" in message and message.endswith(f" {bound}")
    assert "A/C/G/T" in usage_error([*args, "--stop", "TXA"]).format_message()
    assert "A/C/G/T" in usage_error([*args, "--stop", ""]).format_message()
    assert "table output" in usage_error([*args, "--logprobs"]).format_message()  # FASTA on stdout
    assert "table output" in usage_error([*args, "--logprobs", "-o", "x.fa"]).format_message()
    draft = usage_error([*args, "--logprobs", "-o", "x.tsv", "--draft", tiny_folder])
    assert "--logprobs" in draft.format_message()


def test_non_finite_outputs_are_failed_rows_of_score_and_generate(
    overflow_folder: Path, tmp_path: Path
) -> None:
    scores = tmp_path / "s.jsonl"
    result = run(["score", "-m", overflow_folder, "ACGTACGTAGCT", "TTGACAGG", "-o", scores])
    assert result.exit_code == 1 and "no record was scored (failed 2)" in error_message(result)
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [(r["status"], r["mean_logprob"]) for r in rows] == [("failed", None)] * 2
    assert all(r["error"].startswith("non-finite log-probability") for r in rows)
    gens = tmp_path / "g.jsonl"
    result = run(
        ["generate", "-m", overflow_folder, "ACGTAC", "TTGACA", "--max-bp", "12", "--n", "2", "-o", gens]
    )
    assert result.exit_code == 1 and "no record was generated (failed 2)" in error_message(result)
    rows = [json.loads(line) for line in gens.read_text().splitlines()]
    assert len(rows) == 4 and all(r["status"] == "failed" and r["sequence"] == "" for r in rows)
    assert all(r["finish_reason"] == "error" and r["error"].startswith("non-finite logits") for r in rows)


def test_nan_weights_stop_score_and_generate_before_any_work(tiny_folder: Path, tmp_path: Path) -> None:
    import shutil

    from hexamer.testing import poison_weights

    bad = tmp_path / "nan-model"
    shutil.copytree(tiny_folder, bad)
    poison_weights(bad, float("nan"))
    for command in ("score", "generate"):
        result = run([command, "-m", bad, "ACGTACGTAGCT", "-o", tmp_path / f"{command}.tsv"])
        assert result.exit_code == 2 and not (tmp_path / f"{command}.tsv").exists()
        assert error_message(result).startswith("tensor 'model.layers.0.input_layernorm.weight' in ")
        assert error_message(result).count("\n") == 0 and "has 64 NaN values" in error_message(result)


def test_a_draft_model_with_nan_weights_is_refused_at_load(tiny_folder: Path, tmp_path: Path) -> None:
    import shutil

    from hexamer.testing import poison_weights

    bad = tmp_path / "nan-draft"
    shutil.copytree(tiny_folder, bad)
    poison_weights(bad, float("inf"), "model.embed_tokens.weight")
    result = run(["generate", "-m", tiny_folder, "ACGTAC", "--max-bp", "12", "--draft", bad])
    assert result.exit_code == 2 and "'model.embed_tokens.weight'" in error_message(result)
    assert "infinite values" in error_message(result)
