"""``hexamer eval`` end to end on the tiny model: one task, the whole suite, the report."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hexamer.cli.eval_cmd import parse_option
from hexamer.testing.cli import error_message, run, run_ok
from tests.evals.lookalike import write_brca2, write_clinvar, write_sequence_recovery, write_traitgym


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path / "cache"))


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _perturbation_and_niah(root: Path, dna: str) -> set[str]:
    """Data for the other module's tasks, when they are installed (reported as skipped otherwise)."""
    present = set()
    if _has("hexamer.evals.tasks.perturbation"):
        rng = random.Random(0)
        for config in ("motif_human", "syn_human", "syn_mouse"):
            rows = []
            for _ in range(4):
                s = rng.randrange(0, len(dna) - 300)
                real = dna[s : s + 180]
                rows.append({"original_sequence": real, "sequence": real[:60] + "CAG" * 10 + real[90:]})
            folder = root / "carbon-perturbation-bench" / config
            folder.mkdir(parents=True)
            pq.write_table(pa.Table.from_pylist(rows), folder / "test.parquet")
        present |= {"triplet", "codon"}
    if _has("hexamer.evals.tasks.niah"):
        rows = []
        for i in range(3):
            key, value = dna[i * 50 : i * 50 + 24], dna[5000 + i * 24 : 5024 + i * 24]
            prompt = dna[9000 : 9000 + 216] + key + value + dna[12000 : 12000 + 120] + key
            wrong = dna[7000 + i * 24 : 7024 + i * 24]
            rows.append(
                {
                    "uid": f"niah_4k_{i:06d}",
                    "context_length_tokens": 4096,
                    "value_len_bp": 24,
                    "prompt": prompt,
                    "value": value,
                    "positive_sequence": prompt + value,
                    "negative_sequence": prompt + wrong,
                }
            )
        folder = root / "genome-niah" / "niah_4k"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "test.parquet")
        present.add("niah")
    return present


def test_parse_option() -> None:
    assert parse_option("context_length=48000") == ("context_length", 48000)
    assert parse_option("rev_comp_avg=false") == ("rev_comp_avg", False)
    assert parse_option("hg38=/x/hg38.parquet") == ("hg38", "/x/hg38.parquet")


def test_single_task_both_levels(tmp_path: Path, tiny_folder: Path, human_dna: str) -> None:
    write_brca2(tmp_path, human_dna, n=10, window=180)
    out = tmp_path / "out"
    args = [
        "eval",
        "-m",
        str(tiny_folder),
        "--task",
        "brca2",
        "--data",
        str(tmp_path / "brca2-vep" / "brca2_vep.parquet"),
        "--out",
        str(out),
        "--bootstrap",
        "50",
        "--report",
        str(tmp_path / "r.md"),
    ]
    run_ok(args)
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["task"], r["level"], r["status"]) for r in summary["results"]] == [
        ("brca2", "token", "ok"),
        ("brca2", "bp", "ok"),
    ]
    token = json.loads((out / "brca2-token.json").read_text())
    assert token["summary"]["num_variants"] == 10 and "AUROC" in token["summary"]
    assert token["ci95"]["auroc"][0] <= token["metrics"]["auroc"] <= token["ci95"]["auroc"][1]
    md = (tmp_path / "r.md").read_text()
    assert "| BRCA2 VEP | token |" in md and "84.63" in md and "brca2-roc.png" in md
    again = run(args)  # served from the cache
    assert again.exit_code == 0
    assert json.loads((out / "brca2-token.json").read_text())["n_cached"] == 10


def test_schema_error_is_reported(tmp_path: Path, tiny_folder: Path) -> None:
    bad = tmp_path / "brca2_vep.parquet"
    pq.write_table(pa.Table.from_pylist([{"chrom": 13, "pos": 5}]), bad)
    result = run(
        ["eval", "-m", str(tiny_folder), "-t", "brca2", "--data", str(bad), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 2
    message = error_message(result)
    assert "missing column(s)" in message and "ref_seq" in message


def test_suite_all_with_report(tmp_path: Path, tiny_folder: Path, human_dna: str, lambda_dna: str) -> None:
    data = tmp_path / "data"
    write_sequence_recovery(data, human_dna, n=6, ctx=150)
    write_brca2(data, human_dna, n=8, window=180)
    write_traitgym(data, human_dna, n=12, window=180)
    write_clinvar(data, {"20": human_dna[:5000], "X": lambda_dna[:3000]}, n=8)
    present = {"sr", "brca2", "traitgym", "clinvar_coding", "clinvar_noncoding"} | _perturbation_and_niah(
        data, human_dna
    )
    out = tmp_path / "out"
    report = tmp_path / "report.html"
    run_ok(
        [
            "eval",
            "-m",
            str(tiny_folder),
            "--suite",
            "all",
            "--data-root",
            str(data),
            "--limit",
            "4",
            "--out",
            str(out),
            "--report",
            str(report),
            "--bootstrap",
            "30",
            "-O",
            "context_length=600",
            "--batch-size",
            "4",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    status = {(r["task"], r["level"]): r["status"] for r in summary["results"]}
    for name in (
        "sr",
        "brca2",
        "traitgym",
        "clinvar_coding",
        "clinvar_noncoding",
        "triplet",
        "codon",
        "niah",
    ):
        want = "ok" if name in present else "skipped"
        assert status[(name, "token")] == want and status[(name, "bp")] == want, (name, status)
    assert all(
        r["n_examples"] <= 4 or r["task"] in ("triplet", "codon", "niah")
        for r in summary["results"]
        if r["status"] == "ok"
    )
    html = report.read_text()
    assert "data:image/png;base64," in html and "<img" in html and 'src="plots' not in html
    for title in (
        "Sequence recovery",
        "BRCA2 VEP",
        "TraitGym Mendelian",
        "ClinVar coding",
        "ClinVar non-coding",
    ):
        assert title in html


def test_report_dash_writes_markdown_alone_on_stdout(
    tmp_path: Path, tiny_folder: Path, human_dna: str
) -> None:
    """`--report -`: the Markdown report is all of stdout (the table and messages go to stderr)."""
    write_brca2(tmp_path, human_dna, n=6, window=120)
    data = tmp_path / "brca2-vep" / "brca2_vep.parquet"
    args = ["eval", "-m", str(tiny_folder), "--task", "brca2", "--level", "token", "--data", str(data),
            "--out", str(tmp_path / "out"), "--bootstrap", "0", "--report", "-"]  # fmt: skip
    result = run_ok(args)
    assert result.stdout.lstrip().startswith("#") and "| BRCA2 VEP | token |" in result.stdout
    assert "wrote" not in result.stdout and "summary.json" in result.stderr
    assert (tmp_path / "out" / "summary.json").is_file()
