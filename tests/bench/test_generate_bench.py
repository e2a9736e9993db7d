"""The generation benchmark runs every backend on the same weights and reports ratios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.bench.generate import run_generate_bench
from hexamer.testing.cli import run, run_ok

pytest.importorskip("transformers")


def test_rows_and_ratios(tiny_folder: Path) -> None:
    rows = run_generate_bench(tiny_folder, batch_sizes=(2, 1), prompt_bp=30, new_bp=13, repeats=2)
    assert [(r.backend, r.batch) for r in rows] == [
        (b, n) for n in (2, 1) for b in ("hexamer-token", "hexamer-bp", "transformers")
    ]
    for r in rows:
        assert r.bp_per_s == pytest.approx(r.batch * 13 / r.seconds)
        assert r.ratio_vs_transformers is not None and r.ratio_vs_transformers > 0
    assert all(r.ratio_vs_transformers == 1.0 for r in rows if r.backend == "transformers")


def test_cli_tiny_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    out = tmp_path / "gen.json"
    run_ok(
        [
            "bench",
            "generate",
            "--shape",
            "tiny",
            "--batch-sizes",
            "2",
            "--prompt-bp",
            "24",
            "--new-bp",
            "12",
            "--backends",
            "hexamer-token,hexamer-bp",
            "--json",
            str(out),
        ]
    )
    notes = json.loads(out.read_text())["notes"]
    assert any(n.startswith("batch 2: bp-level costs") and "fastest and slowest" in n for n in notes)
    bad = run(["bench", "generate", "--shape", "tiny", "--backends", "vllm"])
    assert bad.exit_code != 0
