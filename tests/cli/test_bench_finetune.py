"""``hexamer bench finetune`` on the command line: help, usage errors, the table as JSON on stdout."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from hexamer.bench import finetune as bench_finetune
from hexamer.cli import app


def test_help() -> None:
    assert CliRunner().invoke(app, ["bench", "finetune", "--help"]).exit_code == 0


@pytest.mark.parametrize(
    "args",
    [
        ["--batch-size", "0"],
        ["--methods", "full,dora"],
        ["--rounds", "2"],
        ["--steps", "0"],
        ["--shape", "huge"],
        ["--precision", "fp16"],
    ],
)
def test_bad_options_are_usage_errors(args: list[str]) -> None:
    assert CliRunner().invoke(app, ["bench", "finetune", *args]).exit_code == 2


def test_json_on_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        return {"step_seconds": [1.0 if spec["case"] == "hexamer" else 2.0], "peak_rss_bytes": 2**30}

    monkeypatch.setattr(bench_finetune, "run_in_subprocess", fake)
    result = CliRunner().invoke(
        app, ["bench", "finetune", "-m", "unused", "--methods", "full", "--no-peer", "-o", "-"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["name"] == "finetune" and [r["case"] for r in data["rows"]] == ["hexamer fit, full"]
    assert data["rows"][0]["examples/s"] == pytest.approx(16.0)
