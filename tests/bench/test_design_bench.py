"""``hexamer bench design-evolve``: both sides give the same scores; options are range-checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.bench.common import BenchOptionError
from hexamer.bench.design import run_design_evolve_bench
from hexamer.carbon import Carbon
from hexamer.testing.cli import run_ok


def test_report_rows(tiny_folder: Path) -> None:
    report = run_design_evolve_bench(
        Carbon.from_pretrained(tiny_folder), model_name="tiny", length=20, rounds=3
    )
    assert [r["method"] for r in report.rows] == ["shared prefix", "one forward each"]
    assert all(r["candidates"] == 60 and r["max_abs_diff"] < 1e-4 for r in report.rows)
    assert report.rows[1]["speedup"] == 1.0


def test_stock_side_and_reference_sample(tiny_folder: Path) -> None:
    report = run_design_evolve_bench(
        Carbon.from_pretrained(tiny_folder), model_name="tiny", length=20, stock=True, reference_sample=9
    )
    assert [r["method"] for r in report.rows][2] == "one forward each (stock scorer)"
    assert all(r["candidates"] == 60 and r["max_abs_diff"] < 1e-4 for r in report.rows)
    assert any("sample of 9 of 60" in n for n in report.notes)


def test_cli_json(tiny_folder: Path) -> None:
    result = run_ok(
        ["bench", "design-evolve", "--model", tiny_folder, "--length", "18", "--threads", "1", "-o", "-"]
    )
    assert json.loads(result.stdout)["rows"][0]["candidates"] == 54


@pytest.mark.parametrize(
    ("option", "value"),
    [("length", 5), ("rounds", 1), ("batch_size", 0), ("weight", 0.0), ("reference_sample", -1)],
)
def test_bad_options(tiny_folder: Path, option: str, value: float) -> None:
    with pytest.raises(BenchOptionError, match=option.replace("_", "-")):
        run_design_evolve_bench(Carbon.from_pretrained(tiny_folder), model_name="tiny", **{option: value})
