"""The CLI is a thin layer: each command runs end to end on a local folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.testing.cli import error_message, run, run_json, run_ok


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path / "cache"))


def test_tokenize_json(tiny_folder: Path) -> None:
    result = run_ok(["tokenize", "--model", str(tiny_folder), "--json", "hi <dna>ACGTACGT</dna>"])
    data = json.loads(result.stdout)
    assert data["token_mask"][-3:] == [6, 2, 0]


def test_tokenize_table_and_auto_tags(tiny_folder: Path) -> None:
    # the table is for people; --json is checked
    run_ok(["tokenize", "-m", str(tiny_folder), "--auto-dna-tags", "ACGTAC"])
    data = run_json(["tokenize", "-m", str(tiny_folder), "--auto-dna-tags", "ACGTAC"])
    assert data["kinds"] == ["DNA tag", "6-mer", "DNA tag"]


def test_info(tiny_folder: Path) -> None:
    run_ok(["info", "--model", str(tiny_folder)])
    data = run_json(["info", "--model", str(tiny_folder)])
    assert data["vocab_size"] == 4608 and data["k"] == 6
    assert data["config"]["num_hidden_layers"] == 2


def test_demo_runs_on_the_shipped_demo_model(tmp_path: Path) -> None:
    result = run_ok(["demo", "--out", str(tmp_path / "tour"), "--json"])
    summary = json.loads(result.stdout)
    assert summary["model"].endswith("demo-model")
    assert summary["steps"]["tokenise"]["fast_path_matches"] is True
    assert (tmp_path / "tour" / "summary.json").is_file()


def test_builtin_tiny_model_is_built_once(tmp_path: Path) -> None:
    from hexamer.default_model import builtin_tiny_model

    first = builtin_tiny_model()
    assert (first / "config.json").is_file() and builtin_tiny_model() == first
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_bad_model_folder_is_a_clean_error(tmp_path: Path) -> None:
    result = run(["tokenize", "--model", str(tmp_path), "x"])
    assert result.exit_code == 2
    assert "has no tokenizer.json" in error_message(result)


def test_bench_tokenizer_small(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run_ok(
        [
            "bench",
            "tokenizer",
            "-m",
            str(tiny_folder),
            "--sizes",
            "6000,1e4",
            "--repeats",
            "1",
            "--json",
            str(out),
        ]
    )
    rows = json.loads(out.read_text())["rows"]  # a hexamer.bench.report.BenchReport
    assert {r["n_bp"] for r in rows} == {6000, 10000}
    assert all(r["mbp_per_s"] > 0 for r in rows)
    bad = run(["bench", "tokenizer", "-m", str(tiny_folder), "--sizes", "abc"])
    assert bad.exit_code != 0


def test_version_help_alias_and_listed_choices() -> None:
    from hexamer import __version__

    result = run(["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == __version__
    assert run(["version"]).stdout.strip() == __version__
    for args in (["-h"], ["generate", "-h"], ["bench", "-h"], ["bench", "fns", "-h"], ["train", "-h"]):
        assert run(args).exit_code == 0, args
    from hexamer.testing.cli import usage_error

    assert "'bp', 'token'" in usage_error(["generate", "ACGT", "--mode", "codon"]).format_message()
    dtypes = usage_error(["generate", "ACGT", "--dtype", "fp8"]).format_message()
    assert "'auto', 'float32', 'bfloat16', 'float16'" in dtypes
    assert "'window', 'next_base'" in usage_error(["vep", "--recipe", "x"]).format_message()
    missing = usage_error(["vep", "--no-rc-average", "--fasta", "f.fa", "-o", "x.tsv"]).format_message()
    assert "--vcf" in missing  # --no-rc-average itself is accepted
