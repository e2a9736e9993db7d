"""The FNS-cost bench: token vs bp level for generation, sampling and scoring, same model."""

from __future__ import annotations

from pathlib import Path

from hexamer import Carbon
from hexamer.bench.fns_cost import overheads, run_fns_bench


def test_rows_and_overheads(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2)
    report = run_fns_bench(
        carbon, batch_sizes=(2, 1), prompt_bp=24, new_bp=12, score_sequences=2, score_bp=60, repeats=1
    )
    tasks = {(r["task"], r["batch"]) for r in report.rows}
    assert tasks == {
        ("generate (end to end)", 2),
        ("sampling only (per step)", 2),
        ("generate (end to end)", 1),
        ("sampling only (per step)", 1),
        ("score (end to end)", 2),
        ("scoring math only", 2),
    }
    over = overheads(report)
    assert ("score (end to end)", 2, "bp (exact chain rule)") in over
    assert all(r["overhead vs token"] is None for r in report.rows if r["level"] == "token")
    for r in report.rows:
        assert r["seconds"] > 0 and r["bp/s"] > 0
    assert any("target" in n for n in report.notes)
