"""``hexamer.vep`` with a remote scorer: same rows, statuses and scores as the local model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.testing.cli import run_json, usage_error
from hexamer.vep import run_vep, score_variants

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"


@pytest.fixture(scope="module")
def remote(vllm_url: str, tiny_folder: Path):
    with Carbon.from_server(vllm_url, tokenizer=tiny_folder, top_n=4608) as m:
        yield m


@pytest.mark.parametrize(
    "vcf,recipe,options",
    [
        ("chr20_slice.vcf", "window", {"window": 24}),
        ("chr20_slice.vcf", "next_base", {"context": 120, "context_grid": 60}),
        pytest.param(
            "chr20_slice.vcf", "window", {"window": 120, "rc_average": True}, marks=pytest.mark.slow
        ),
        pytest.param("edge_cases.vcf", "window", {"window": 60}, marks=pytest.mark.slow),
        pytest.param(
            "edge_cases.vcf", "next_base", {"context": 60, "context_grid": 6}, marks=pytest.mark.slow
        ),
    ],
)
def test_remote_vep_equals_local(remote, local: Carbon, vcf: str, recipe: str, options: dict) -> None:
    got = list(score_variants(remote, DATA / vcf, FASTA, recipe=recipe, **options))
    want = list(score_variants(local, DATA / vcf, FASTA, recipe=recipe, **options))
    assert [(r["record"], r["alt_index"], r["status"], r["reason"]) for r in got] == [
        (r["record"], r["alt_index"], r["status"], r["reason"]) for r in want
    ]
    assert any(r["status"] == "ok" for r in got)
    for g, w in zip(got, want, strict=True):
        if w["score"] is None:
            assert g["score"] is None
        else:
            assert g["score"] == pytest.approx(w["score"], abs=1e-4)


def test_run_vep_remote_writes_output(remote, tmp_path: Path) -> None:
    out = tmp_path / "scored.tsv"
    result = run_vep(
        remote, DATA / "chr20_slice.vcf", FASTA, out, recipe="next_base", context=60, context_grid=6
    )
    assert result.n_rows >= 9 and result.status_counts.get("ok", 0) >= 1
    assert out.read_text().count("\n") == result.n_rows + 1


def test_cli_vep_server(vllm_url: str, tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored.jsonl"
    args = ["vep", "--vcf", str(DATA / "chr20_slice.vcf"), "--fasta", str(FASTA), "--out", str(out)]
    args += [
        "--server",
        vllm_url,
        "--tokenizer",
        str(tiny_folder),
        "--recipe",
        "next_base",
        "--context",
        "60",
        "--context-grid",
        "6",
        "--top-n",
        "4608",
    ]
    summary = run_json(args)
    assert summary["output"] == str(out) and out.exists()
    assert sum(summary["status_counts"].values()) == summary["n_rows"] > 0
    bad = usage_error([*args[:7], "--server", vllm_url, "--model", str(tiny_folder)])
    assert "not both" in bad.format_message()
