"""``bench all``: every table written as JSON/PNG plus a summary; missing or failing benches are
recorded and do not stop the others."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hexamer.bench import run_all as run_all_module
from hexamer.bench.report import BenchReport
from hexamer.bench.run_all import EXTERNAL_PLOTS, run_all, run_external
from hexamer.bench.spec import TINY_PAIR, run_spec_bench

pytest.importorskip("transformers")


def fake_bench(*, quick: bool, log: object) -> BenchReport:
    assert quick is True
    return BenchReport(
        name="fake", title="a fake external bench", columns=["x", "y"], rows=[{"x": "a", "y": 1.0}]
    )


def broken_bench(*, quick: bool, log: object) -> BenchReport:
    raise RuntimeError("no GPU here")


def small_spec_bench(*, quick: bool, log: Callable[[str], None]) -> BenchReport:
    """The real speculative-decoding bench on a very small synthetic pair (built under $HEXAMER_CACHE)."""
    return run_spec_bench(
        quick=quick,
        log=log,
        shape=TINY_PAIR,
        noises=(0.0, 0.05),
        modes=("token",),
        prompt_bp=12,
        new_bp=18,
    )


@pytest.fixture
def externals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        run_all_module,
        "EXTERNAL",
        {
            "spec": (__name__, "fake_bench"),
            "serve": ("hexamer.bench.no_such_module", "run_serve_bench"),
            "llamacpp": (__name__, "broken_bench"),
        },
    )


def test_quick_run_on_tiny_model(tiny_folder: Path, tmp_path: Path, externals: None) -> None:
    out = tmp_path / "bench"
    outcomes = run_all(
        out,
        folder=tiny_folder,
        quick=True,
        batch_sizes=(2, 1),
        prompt_bp=24,
        new_bp=12,
        tokenizer_sizes=[1200],
    )
    status = {o.name: o.status for o in outcomes}
    assert status == {
        "tokenizer": "ok",
        "generate": "ok",
        "throughput": "ok",
        "fns": "ok",
        "roofline": "ok",
        "spec": "ok",
        "serve": "skipped",
        "llamacpp": "failed",
    }
    for name in ("tokenizer", "generate", "throughput", "fns", "roofline"):
        data = json.loads((out / f"{name}.json").read_text())
        assert data["rows"] and data["machine"]["torch"] and data["command"] == "hexamer bench all"
        assert (out / f"{name}.png").stat().st_size > 1000
    assert (out / "fake.json").is_file()
    summary = (out / "summary.md").read_text()
    assert "## a fake external bench" in summary and "| x | y |" in summary
    assert "**serve** (skipped)" in summary and "**llamacpp** (failed): RuntimeError: no GPU here" in summary
    throughput = json.loads((out / "throughput.json").read_text())
    assert {r["valid DNA %"] for r in throughput["rows"]} == {100.0}


def test_only_and_missing_function(
    tmp_path: Path, tiny_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_all_module, "EXTERNAL", {"spec": (__name__, "nothing_here")})
    outcomes = run_all(tmp_path, folder=tiny_folder, only={"tokenizer", "spec"}, tokenizer_sizes=[600])
    assert [(o.name, o.status) for o in outcomes] == [("tokenizer", "ok"), ("spec", "skipped")]
    assert "has no nothing_here()" in outcomes[1].reason
    assert run_external("spec", quick=True, log=print).status == "skipped"


def test_spec_table_is_plotted(tmp_path: Path, tiny_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(run_all_module, "EXTERNAL", {"spec": (__name__, "small_spec_bench")})
    out = tmp_path / "bench"
    outcomes = run_all(out, folder=tiny_folder, only={"spec"})
    assert [(o.name, o.status) for o in outcomes] == [("spec", "ok")]
    assert outcomes[0].files == [out / "spec.json", out / "spec.png"]
    assert (out / "spec.png").stat().st_size > 1000
    report = outcomes[0].report
    assert report is not None and not any("plot failed" in n for n in report.notes)
    # the plot reads columns the bench really fills: one bar per (noise level, mode/decoding)
    plot = EXTERNAL_PLOTS["spec"]
    assert {(r[plot["x"]], r[plot["group"]]) for r in report.rows} == {
        (f"noise {n:g}", f"token {d}") for n in (0.0, 0.05) for d in ("greedy", "sampled")
    }
    assert all(r[plot["y"]] > 0 for r in report.rows)
    assert "spec.png" in (out / "summary.md").read_text()
