"""``hexamer bench vep`` / ``bench embed``: both sides compute the same thing and agree; JSON/plot written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.testing.cli import run_ok, usage_error


def test_bench_vep_quick(tiny_folder: Path, tmp_path: Path) -> None:
    out, png = tmp_path / "vep.json", tmp_path / "vep.png"
    args = ["bench", "vep", "-m", str(tiny_folder), "--quick", "--sites", "3", "--alts-per-site", "2"]
    run_ok([*args, "--json", str(out), "--plot", str(png)])
    rows = json.loads(out.read_text())["rows"]
    assert {(r["recipe"], r["method"]) for r in rows} == {
        (recipe, method)
        for recipe in ("window", "next_base")
        for method in ("hexamer engine", "naive (hexamer model)", "transformers (published scripts)")
    }
    for r in rows:
        assert r["variants"] == 6 and r["variants/s"] > 0 and r["× vs engine"] > 0
        if r["method"] == "hexamer engine":
            assert r["max abs diff"] <= 1e-4 and r["speed-up"] > 0 and r["× vs engine"] == 1.0
        if r["method"] == "transformers (published scripts)":
            assert r["max abs diff"] <= 1e-4  # same scores as the engine, key by key
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_bench_vep_no_published(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "vep.json"
    args = ["bench", "vep", "-m", str(tiny_folder), "--quick", "--sites", "2", "--alts-per-site", "1"]
    run_ok([*args, "--recipes", "window", "--no-published", "--json", str(out)])
    methods = [r["method"] for r in json.loads(out.read_text())["rows"]]
    assert methods == ["hexamer engine", "naive (hexamer model)"]


def test_bench_vep_bad_recipe(tiny_folder: Path) -> None:
    assert (
        "nope" in usage_error(["bench", "vep", "-m", str(tiny_folder), "--recipes", "nope"]).format_message()
    )


def test_bench_embed_matches_transformers(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "embed.json"
    args = ["bench", "embed", "-m", str(tiny_folder), "--sequences", "5", "--length", "200"]
    run_ok([*args, "--batch-size", "2", "-o", str(out), "--price-per-hour", "2"])
    rows = {r["backend"]: r for r in json.loads(out.read_text())["rows"]}
    for r in rows.values():  # the price turns sequences/s into sequences/hour and $ per million
        assert r["sequences/hour"] == pytest.approx(r["sequences/s"] * 3600)
        assert r["$ per million sequences"] == pytest.approx(2 / r["sequences/hour"] * 1e6)
    assert set(rows) == {"hexamer", "transformers"}
    assert rows["hexamer"]["max abs diff"] < 1e-4  # same vectors as the peer
    assert rows["hexamer"]["sequences/s"] > 0 and rows["transformers"]["× transformers"] == 1.0


def test_bench_vep_published_needs_transformers(tiny_folder: Path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a)
    )
    error = usage_error(["bench", "vep", "-m", str(tiny_folder), "--quick", "--published"])
    assert "transformers" in error.format_message()


def test_bench_vep_real_vcf_and_window_grid(tiny_folder: Path, tmp_path: Path) -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "vep"
    out = tmp_path / "vep.json"
    args = ["bench", "vep", "-m", str(tiny_folder), "--quick", "--recipes", "window", "--no-published"]
    args += ["--vcf", str(data / "chr20_slice.vcf"), "--fasta", str(data / "chr20_slice.fa.gz")]
    run_ok([*args, "--window-grid", "300", "--json", str(out)])
    report = json.loads(out.read_text())
    assert "chr20_slice.vcf" in report["title"] and "window grid 300 bp" in report["title"]
    engine = report["rows"][0]
    assert engine["variants"] > 0 and engine["max abs diff"] <= 1e-4
    error = usage_error(["bench", "vep", "-m", str(tiny_folder), "--vcf", str(data / "chr20_slice.vcf")])
    assert "--fasta" in error.format_message()
