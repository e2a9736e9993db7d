"""``hexamer bench track``: FLOP count by hand, and the report's rows on the tiny model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.bench.roofline import prefill_flops
from hexamer.bench.track import run_track_bench, track_flops
from hexamer.testing.cli import run_ok


def test_flops_count_the_lm_head_at_every_position(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    cfg = carbon.model.config
    expected = prefill_flops(cfg, batch=1, tokens=11, head_rows=0) + 2.0 * cfg.hidden_size * 4096 * 11
    assert track_flops(carbon, [10]) == pytest.approx(expected)
    assert track_flops(carbon, [10, 10]) == pytest.approx(2 * expected)


def test_report_rows(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    report = run_track_bench(carbon, bp=900, window=300, stride=150, repeats=3, peak=1e12)
    track, forwards, peak = report.rows
    assert track["forwards"] == forwards["forwards"] == 5  # 150 tokens: windows of 50 every 25
    assert track["rounds"] == 3 and track["bp/s"] == pytest.approx(900 / track["seconds_median"])
    assert track["% of matmul peak"] == pytest.approx(100 * track["flops"] / track["seconds_median"] / 1e12)
    assert peak["GFLOP/s"] == 1000


def test_cli_writes_json(tiny_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "track.json"
    run_ok(
        ["bench", "track", "-m", tiny_folder, "--bp", "600", "--window", "300", "--repeats", "3", "-o", out]
    )
    import json

    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["bp/s"] > 0 and rows[0]["forwards"] == 3
