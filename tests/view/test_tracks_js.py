"""hexamer's igv.js track classes (``hexamer/data/view/tracks.js``) under Node, with a stand-in for
igv.js's ``TrackBase`` and a canvas that records each rectangle: what the stacked logo and the
ISM heat-map draw, where and in which colour, and what a click on them shows. Skipped without
``node``; the browser tests draw the same classes in the real igv.js."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hexamer.view.assets import template

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="no node on PATH")

HARNESS = Path(__file__).with_name("tracks_harness.js")
RED, PALE, LIGHT_BLUE, GREY = "rgb(178,24,43)", "rgb(247,247,247)", "rgb(146,197,222)", "rgb(189,189,189)"


def _run(cases: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "tracks.js"
    script.write_text(template("tracks.js"))
    done = subprocess.run(
        ["node", str(HARNESS), str(script)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_ism_heat_map_cells(tmp_path: Path) -> None:
    feature = {"chr": "chr20", "start": 10, "end": 11, "ref": "G", "scores": {"A": -2.0, "C": 1.0, "T": 0.0}}
    config = {"name": "ism", "features": [feature], "span": 2.0, "height": 40, "colors": {}}
    case = {
        "type": "hexamerism",
        "config": config,
        "chr": "20",
        "bpPerPixel": 0.5,
        "clicks": [[10.5, 5], [10.5, 25]],
    }
    out = _run([case], tmp_path)
    assert out["registered"] == ["hexamerlogo", "hexamerism"]
    (res,) = out["results"]
    assert len(res["features"]) == 1  # chr20 in the table, 20 in the genome: one name
    # rows A C G T, 10 px each, 2 px wide (0.5 bp per pixel), at x = 10 / 0.5
    assert [(r["x"], r["y"], r["w"], r["h"]) for r in res["rects"]] == [(20, k * 10, 2, 10) for k in range(4)]
    # A: -2 = -span (red end); C: +1 = half way to blue; G: the reference (grey); T: 0 (the centre)
    assert [r["fill"] for r in res["rects"]] == [RED, LIGHT_BLUE, GREY, PALE]
    assert res["note"] == {
        "kind": "ism",
        "cells": 3,
        "span": 2.0,
        "first": {"start": 10, "alt": "A", "value": -2.0},
    }
    first, ref_cell = res["popups"]
    assert {"name": "SNV", "value": "G>A"} in first and {"name": "RawScore", "value": "-2.000"} in first
    assert {"name": "RawScore", "value": "reference base"} in ref_cell


def test_logo_stacks_the_four_bigwigs(tmp_path: Path) -> None:
    members = [  # igv.js features of prob_A .. prob_T, with different intervals (and T missing at 1)
        [{"start": 0, "end": 2, "value": 0.5}],
        [{"start": 0, "end": 1, "value": 0.2}, {"start": 1, "end": 2, "value": 0.3}],
        [{"start": 0, "end": 2, "value": 0.2}],
        [{"start": 0, "end": 1, "value": 0.1}],
    ]
    config = {"name": "logo", "tracks": [{}, {}, {}, {}], "height": 100, "colors": {}}
    case = {"type": "hexamerlogo", "config": config, "members": members, "chr": "20", "bpPerPixel": 0.1}
    case["clicks"] = [[1.5, 0]]
    (res,) = _run([case], tmp_path)["results"]
    assert [(f["start"], f["end"], f["values"]) for f in res["features"]] == [
        (0, 1, [0.5, 0.2, 0.2, 0.1]),
        (1, 2, [0.5, 0.3, 0.2, None]),
    ]
    col0 = [r for r in res["rects"] if r["x"] == 0]
    # smallest at the bottom, largest on top, each as tall as its probability, filling the track
    assert [(r["fill"], round(r["y"]), round(r["h"])) for r in col0] == [
        ("red", 90, 10),
        ("blue", 70, 20),
        ("orange", 50, 20),
        ("green", 0, 50),
    ]
    assert {r["w"] for r in res["rects"]} == {10}  # one base = 10 px at 0.1 bp per pixel
    (popup,) = res["popups"]
    assert {"name": "P(A)", "value": "0.5000"} in popup and {"name": "P(T)", "value": "no value"} in popup
    assert res["note"]["positions"] == 2 and res["note"]["letters"] is True
