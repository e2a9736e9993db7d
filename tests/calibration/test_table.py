"""Calibration tables: CADD-style PHRED, monotone, saved and refused for another model or settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hexamer.calibration import Calibration, CalibrationError, CalibrationMismatch
from hexamer.vep import VepSettings

WINDOW = {"recipe": "window", "window": 600, "window_grid": 128, "rc_average": False}


def table(recipe: str = "window") -> Calibration:
    scores = np.random.default_rng(3).normal(size=1000)
    settings = WINDOW if recipe == "window" else {"recipe": "next_base", "context": 600, "context_grid": 60}
    return Calibration.from_scores(scores, model="abc", settings=settings)


def test_phred_is_cadd_like_and_monotone() -> None:
    cal = table("window")
    raw = np.random.default_rng(3).normal(size=1000)
    d = np.sort(-raw)  # window: more negative raw = more deleterious
    # the most deleterious background SNV is the top 1/1000: PHRED 30
    assert cal.phred(-d[-1]) == pytest.approx(30.0)
    # the top 10 %: PHRED 10; the least deleterious and below: 0
    assert cal.phred(-d[900]) == pytest.approx(10.0)
    assert cal.phred(-d[0]) == 0.0 and cal.phred(100.0) == 0.0 and cal.phred(-100.0) == pytest.approx(30.0)
    grid = np.linspace(-5, 5, 2001)
    values = cal.phred_many(grid)
    assert (np.diff(values) <= 0).all()  # raw up (alt likelier) -> PHRED down
    assert [cal.phred(x) for x in grid[::100]] == pytest.approx(list(values[::100]))
    assert cal.phred(None) is None and np.isnan(cal.phred_many([np.nan]))[0]
    nb = table("next_base")
    assert nb.phred(5.0) > nb.phred(0.0) > nb.phred(-5.0)  # next_base: positive raw = deleterious


def test_annotate_snv_rows_only() -> None:
    cal = table()
    rows = [
        {"status": "ok", "kind": "SNV", "score": -2.0},
        {"status": "ok", "kind": "deletion", "score": -2.0},
        {"status": "skipped", "kind": "SNV", "score": None},
    ]
    out = list(cal.annotate(rows))
    assert out[0]["phred"] == cal.phred(-2.0) and out[1]["phred"] is None and out[2]["phred"] is None


def test_save_load_round_trip_and_check(tmp_path) -> None:
    cal = table()
    path = tmp_path / "cal.json"
    cal.save(path)
    back = Calibration.load(path)
    assert back.thresholds == cal.thresholds and back.phreds == cal.phreds and back.model == "abc"
    back.check("abc", VepSettings(window=600, window_grid=128, batch_size=3))  # batching does not matter
    with pytest.raises(CalibrationMismatch, match="model fingerprint xyz"):
        back.check("xyz", VepSettings(window=600, window_grid=128))
    with pytest.raises(CalibrationMismatch, match="window=700"):
        back.check("abc", VepSettings(window=700, window_grid=128))
    with pytest.raises(CalibrationMismatch, match="recipe='next_base'"):
        back.check("abc", VepSettings(recipe="next_base"))


def test_scores_of_another_window_placement_are_refused_by_name() -> None:
    """A table made on 128-bp tiles does not rank variant-centred scores (the default of every
    command), nor the other way round: the error names both placements and the option."""
    tiled = table()
    with pytest.raises(
        CalibrationMismatch,
        match=r"window placement centred \(the calibration's: grid:128, --window-grid 128\)",
    ):
        tiled.check("abc", VepSettings(window=600))
    centred = Calibration.from_scores(range(20), model="abc", settings={**WINDOW, "window_grid": 1})
    with pytest.raises(
        CalibrationMismatch, match=r"window placement grid:64 \(the calibration's: centred, --window-grid 1\)"
    ):
        centred.check("abc", VepSettings(window=600, window_grid=64))
    centred.check("abc", VepSettings(window=600))


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json", "not a JSON"),
        ('{"format": "other"}', "not a hexamer calibration"),
        ('{"format": "hexamer-calibration", "version": 9}', "version 9"),
        ('{"format": "hexamer-calibration", "version": 1, "settings": {"recipe": "x"}}', "settings.recipe"),
    ],
)
def test_load_errors_name_the_file(tmp_path, content, needle) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=needle):
        Calibration.load(path)
    with pytest.raises(CalibrationError, match="no such"):
        Calibration.load(tmp_path / "missing.json")


def test_too_few_scores_refused() -> None:
    with pytest.raises(CalibrationError, match="at least 10"):
        Calibration.from_scores([1.0, 2.0], model="m", settings=WINDOW)


def test_file_is_plain_json(tmp_path) -> None:
    table().save(tmp_path / "c.json")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["format"] == "hexamer-calibration" and "higher = the alt is less likely" in data["sign"]
