"""Every numeric and choice option of vep/score/embed/generate is checked before any work starts.

The commands run with ``standalone_mode=False`` so the option error comes back as the exception
itself (its unwrapped message), and with a model path that does not exist: an error about the
model would mean the option was checked too late.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.cli.checks import THREADS_MAX
from hexamer.testing.cli import run

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
NO_MODEL = ["-m", "/nonexistent/model"]
VEP = [
    "vep",
    *NO_MODEL,
    "--vcf",
    str(DATA / "saureus_rn4220.vcf"),
    "--fasta",
    str(DATA / "chr20_slice.fa.gz"),
]
SCORE = ["score", *NO_MODEL, "ACGTACGT"]
GENERATE = ["generate", *NO_MODEL, "ACGTACGT"]
EMBED = ["embed", *NO_MODEL, "-i", str(DATA / "saureus_nctc8325_slice.fa.gz")]
ISM = ["ism", *NO_MODEL, "--fasta", str(DATA / "chr20_slice.fa.gz"), "-r", "20:60301-60310", "-o", "x.tsv"]
CALIBRATE = ["calibrate", *NO_MODEL, "--fasta", str(DATA / "chr20_slice.fa.gz"), "-o", "x.json"]

CASES = [
    # vep
    ([*VEP, "-o", "x.docx"], "--out"),
    ([*VEP, "-o", "/nonexistent/folder/x.tsv"], "--out"),
    ([*VEP, "-o", "x.tsv", "--threads", str(THREADS_MAX + 1)], "--threads"),
    ([*VEP, "-o", "x.tsv", "--threads", "100000"], "--threads"),
    ([*VEP, "-o", "x.tsv", "--threads", "0"], "--threads"),
    ([*VEP, "-o", "x.tsv", "--device", "tpu:7"], "--device"),
    ([*VEP, "-o", "x.tsv", "--device", "cuda:99"], "--device"),
    ([*VEP, "-o", "x.tsv", "--dtype", "int2"], "--dtype"),
    ([*VEP, "-o", "x.tsv", "--recipe", "both"], "--recipe"),
    ([*VEP, "-o", "x.tsv", "--window", "0"], "--window"),
    # shorter than 30 bp: the score would depend on the REF>ALT pair only (VepSettings.check)
    ([*VEP, "-o", "x.tsv", "--window", "6"], "--window"),
    ([*VEP, "-o", "x.tsv", "--window", "29"], "--window"),
    ([*VEP, "-o", "x.tsv", "--window-grid", "100000"], "--window-grid"),
    ([*VEP, "-o", "x.tsv", "--window", "600", "--window-grid", "301"], "--window-grid"),
    ([*VEP, "-o", "x.tsv", "--recipe", "next_base", "--context", "11"], "--context"),
    ([*VEP, "-o", "x.tsv", "--recipe", "next_base", "--rc-average"], "--rc-average"),
    ([*VEP, "-o", "x.tsv", "--recipe", "next_base", "--window-grid", "60"], "--window-grid"),
    ([*VEP, "-o", "x.tsv", "--window-grid", "0"], "--window-grid"),
    ([*VEP, "-o", "x.tsv", "--context", "0"], "--context"),
    ([*VEP, "-o", "x.tsv", "--context-grid", "-6"], "--context-grid"),
    ([*VEP, "-o", "x.tsv", "--batch-size", "0"], "--batch-size"),
    ([*VEP, "-o", "x.tsv", "--batch-size", str(10**9)], "--batch-size"),
    ([*VEP, "-o", "x.tsv", "--token-budget", str(10**9)], "--token-budget"),
    ([*VEP, "-o", "x.tsv", "--top-n", "0"], "--top-n"),
    ([*VEP, "-o", "x.tsv", "--top-n", str(10**9)], "--top-n"),
    (
        [
            "vep",
            *NO_MODEL,
            "--vcf",
            "/nonexistent.vcf",
            "--fasta",
            str(DATA / "chr20_slice.fa.gz"),
            "-o",
            "x.tsv",
        ],
        "--vcf",
    ),
    # ism and calibrate: the same settings check
    ([*ISM, "--window", "6"], "--window"),
    ([*ISM, "--window-grid", "100000"], "--window-grid"),
    ([*CALIBRATE, "--window", "29"], "--window"),
    ([*CALIBRATE, "--recipe", "next_base", "--context", "6"], "--context"),
    (["bench", "vep", *NO_MODEL, "--window", "6"], "--window"),
    (["bench", "ism", *NO_MODEL, "--window-grid", "100000"], "--window-grid"),
    # score
    ([*SCORE, "-o", "x.docx"], "--out"),
    ([*SCORE, "-o", "x.fa"], "--out"),
    ([*SCORE, "--level", "codon"], "--level"),
    ([*SCORE, "--method", "mc"], "--method"),
    ([*SCORE, "--batch-size", "0"], "--batch-size"),
    ([*SCORE, "--device", "tpu:7"], "--device"),
    ([*SCORE, "--dtype", "float64"], "--dtype"),
    # generate
    ([*GENERATE, "--seed", str(2**70)], "--seed"),
    ([*GENERATE, "--seed", str(-(2**70))], "--seed"),
    ([*GENERATE, "--device", "tpu:7"], "--device"),
    ([*GENERATE, "--mode", "text"], "--mode"),
    ([*GENERATE, "--max-bp", "0"], "--max-bp"),
    ([*GENERATE, "--temperature", "-1"], "--temperature"),
    ([*GENERATE, "--top-p", "1.5"], "--top-p"),
    ([*GENERATE, "--batch-size", str(10**9)], "--batch-size"),
    ([*GENERATE, "-o", "x.docx"], "--out"),
    ([*GENERATE, "--draft", "/nonexistent/draft", "--spec-k", "0"], "--spec-k"),
    # embed
    ([*EMBED, "-o", "x.csv"], "--out"),
    ([*EMBED, "-o", "x.parquet", "--pool", "max"], "--pool"),
    ([*EMBED, "-o", "x.parquet", "--threads", "100000"], "--threads"),
    ([*EMBED, "-o", "x.parquet", "--max-tokens", "0"], "--max-tokens"),
    ([*EMBED, "-o", "x.parquet", "--chunk-overlap", "-1"], "--chunk-overlap"),
    ([*EMBED, "-o", "x.parquet", "--batch-size", "0"], "--batch-size"),
    ([*EMBED, "-o", "x.parquet", "--device", "tpu:7"], "--device"),
    # serve
    (["serve", *NO_MODEL, "--port", "70000"], "--port"),
    (["serve", *NO_MODEL, "--dtype", "float64"], "--dtype"),
    (["serve", *NO_MODEL, "--log-level", "loud"], "--log-level"),
    (["serve", *NO_MODEL, "--max-num-seqs", "0"], "--max-num-seqs"),
    (["serve", *NO_MODEL, "--max-num-seqs", "100000"], "--max-num-seqs"),
]


@pytest.mark.parametrize(
    ("args", "option"), CASES, ids=[" ".join(a[3:] if a[0] != "vep" else a[7:]) for a, _ in CASES]
)
def test_bad_option_is_refused_before_work(args: list[str], option: str, tmp_path: Path) -> None:
    args = [str(tmp_path / a) if a in ("x.tsv", "x.parquet", "x.json") else a for a in args]
    result = run(args, standalone_mode=False)
    exc = result.exception
    assert exc is not None and type(exc).__name__ == "BadParameter", (result.output, exc)
    assert exc.format_message().startswith(f"Invalid value for '{option}'"), exc.format_message()  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []


def test_generate_max_bp_past_the_context_is_refused_before_work(tiny_folder: Path) -> None:
    """--max-bp 10**12 once asked numpy for 3.6 TiB; the model's context is checked first."""
    args = ["generate", "-m", str(tiny_folder), "ACGTACGT", "--max-bp", str(10**12)]
    result = run(args, standalone_mode=False)
    exc = result.exception
    assert exc is not None and type(exc).__name__ == "BadParameter", (result.output, exc)
    assert "exceeds the model's context" in exc.format_message()  # type: ignore[attr-defined]
