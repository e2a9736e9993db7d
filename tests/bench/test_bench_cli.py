"""``hexamer bench`` commands: options reach the benches, tables print, JSON/PNG are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hexamer.bench import run_all as run_all_module
from hexamer.cli import app

runner = CliRunner()


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_tokenizer_json_and_plot(tiny_folder: Path, tmp_path: Path) -> None:
    out = _ok(
        ["bench", "tokenizer", "--model", str(tiny_folder), "--sizes", "1200", "--repeats", "1",
         "--json", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png")]
    )  # fmt: skip
    assert "per-chunk" in out
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert len(rows) == 6 and (tmp_path / "t.png").stat().st_size > 1000


def test_throughput_fns_roofline(tiny_folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    common = ["--model", str(tiny_folder), "--threads", "1"]
    _ok(
        ["bench", "throughput", *common, "--batch-sizes", "2", "--prompt-bp", "24", "--new-bp", "12",
         "--backends", "hexamer-token,transformers-static", "--json", str(tmp_path / "tp.json"),
         "--plot", str(tmp_path / "tp.png")]
    )  # fmt: skip
    rows = json.loads((tmp_path / "tp.json").read_text())["rows"]
    assert [r["backend"] for r in rows] == ["hexamer-token", "transformers (static cache)"]
    assert (tmp_path / "tp.png").is_file()
    _ok(
        ["bench", "fns", *common, "--batch-sizes", "1", "--new-bp", "12", "--score-sequences", "2",
         "--score-bp", "60", "--repeats", "1", "--json", str(tmp_path / "fns.json")]
    )  # fmt: skip
    assert json.loads((tmp_path / "fns.json").read_text())["name"] == "fns"
    out = _ok(
        ["bench", "roofline", *common, "--batch-sizes", "1", "--new-bp", "12", "--repeats", "1", "--quick",
         "--plot", str(tmp_path / "roof.png")]
    )  # fmt: skip
    assert "bandwidth" in out and (tmp_path / "roof.png").is_file()


def test_all_quick_only(tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_all_module, "EXTERNAL", {"spec": ("hexamer.bench.not_there", "run_spec_bench")})
    out = _ok(
        ["bench", "all", "--quick", "--model", str(tiny_folder), "--out", str(tmp_path),
         "--only", "tokenizer,spec"]
    )  # fmt: skip
    assert "spec: skipped" in out
    assert (tmp_path / "tokenizer.json").is_file() and (tmp_path / "summary.md").is_file()


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "throughput", "--shape", "tiny", "--backends", "vllm"],
        ["bench", "throughput", "--shape", "tiny", "--prompt-bp", "25"],
        ["bench", "throughput", "--shape", "huge"],
        ["bench", "fns", "--dtype", "float16"],
        ["bench", "roofline", "--batch-sizes", "one"],
        ["bench", "all", "--out", "x", "--only", "everything"],
    ],
)
def test_bad_options(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code != 0
