"""``hexamer bench`` commands: options reach the benches, tables print, JSON/PNG are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hexamer.bench import run_all as run_all_module
from hexamer.testing.cli import run, run_ok


def test_tokenizer_json_and_plot(tiny_folder: Path, tmp_path: Path) -> None:
    run_ok(  # --json: the old name of -o/--out, still accepted
        ["bench", "tokenizer", "--model", str(tiny_folder), "--sizes", "1200", "--repeats", "1",
         "--json", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png")]
    )  # fmt: skip
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    assert len(rows) == 6 and (tmp_path / "t.png").stat().st_size > 1000
    assert any("per-chunk" in r["implementation"] for r in rows)


def test_out_dash_puts_only_the_json_on_stdout(tiny_folder: Path) -> None:
    result = run_ok(  # progress lines go to stderr, so stdout parses as one JSON document
        ["bench", "generate", "--model", str(tiny_folder), "--batch-sizes", "1", "--prompt-bp", "12",
         "--new-bp", "12", "--backends", "hexamer-token", "--repeats", "1", "-o", "-"]
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert report["name"] == "generate" and [r["backend"] for r in report["rows"]] == ["hexamer-token"]


def test_throughput_fns_roofline(tiny_folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    common = ["--model", str(tiny_folder), "--threads", "1"]
    run_ok(
        ["bench", "throughput", *common, "--batch-sizes", "2", "--prompt-bp", "24", "--new-bp", "12",
         "--backends", "hexamer-token,transformers-static", "--json", str(tmp_path / "tp.json"),
         "--plot", str(tmp_path / "tp.png")]
    )  # fmt: skip
    rows = json.loads((tmp_path / "tp.json").read_text())["rows"]
    assert [r["backend"] for r in rows] == ["hexamer-token", "transformers (static cache)"]
    assert (tmp_path / "tp.png").is_file()
    run_ok(
        ["bench", "fns", *common, "--batch-sizes", "1", "--new-bp", "12", "--score-sequences", "2",
         "--score-bp", "60", "--repeats", "1", "--json", str(tmp_path / "fns.json")]
    )  # fmt: skip
    assert json.loads((tmp_path / "fns.json").read_text())["name"] == "fns"
    run_ok(
        ["bench", "roofline", *common, "--batch-sizes", "1", "--new-bp", "12", "--repeats", "1", "--quick",
         "--plot", str(tmp_path / "roof.png"), "-o", str(tmp_path / "roof.json")]
    )  # fmt: skip
    items = [r["item"] for r in json.loads((tmp_path / "roof.json").read_text())["rows"]]
    assert "memory read bandwidth" in items and (tmp_path / "roof.png").is_file()


def test_all_quick_only(tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_all_module, "EXTERNAL", {"spec": ("hexamer.bench.not_there", "run_spec_bench")})
    run_ok(
        ["bench", "all", "--quick", "--model", str(tiny_folder), "--out", str(tmp_path),
         "--only", "tokenizer,spec", "--price-per-hour", "2.5"]
    )  # fmt: skip
    assert "- **spec** (skipped)" in (tmp_path / "summary.md").read_text()
    table = json.loads((tmp_path / "tokenizer.json").read_text())
    assert "$ per Gbp" in table["columns"]
    for r in table["rows"]:
        assert r["bp/hour"] == pytest.approx(r["Mbp/s"] * 1e6 * 3600)
        assert r["$ per Gbp"] == pytest.approx(2.5 / r["bp/hour"] * 1e9)


def test_all_skips_a_missing_optional_peer_with_the_install_hint(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hexamer.bench import llamacpp

    monkeypatch.setattr(
        llamacpp, "llama_cpp_available", lambda: (False, "not installed: pip install 'hexamer[bench]'")
    )
    result = run_ok(
        [
            "bench",
            "all",
            "--quick",
            "--model",
            str(tiny_folder),
            "--out",
            str(tmp_path),
            "--only",
            "llamacpp",
        ]
    )
    assert "Traceback" not in result.output
    summary = (tmp_path / "summary.md").read_text()
    assert "- **llamacpp** (skipped): not installed: pip install 'hexamer[bench]'" in summary


def test_markup_in_notes_is_printed_as_is() -> None:
    import io

    from rich.console import Console

    from hexamer.bench.report import BenchReport, print_report

    report = BenchReport(name="x", title="t [bold]", columns=["a"], rows=[{"a": "[red]"}])
    report.notes.append("pip install 'hexamer[bench]'")
    buffer = io.StringIO()
    print_report(report, Console(file=buffer, width=10_000, color_system=None))
    assert "hexamer[bench]" in buffer.getvalue() and "[red]" in buffer.getvalue()


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
    result = run(args)
    assert result.exit_code != 0


def test_price_per_hour_adds_bp_per_hour_and_dollars_per_gbp() -> None:
    from hexamer.bench.report import BenchReport, add_economics

    report = BenchReport(name="x", title="t", columns=["backend", "bp/s", "spec bp/s"])
    report.rows = [{"backend": "a", "bp/s": 1000.0, "spec bp/s": 2000.0}, {"backend": "b", "spec bp/s": None}]
    add_economics(report, 3.6)
    assert report.columns[-2:] == ["bp/hour", "$ per Gbp"]
    assert report.rows[0]["bp/hour"] == 2000.0 * 3600  # the last rate column: the improvement
    assert report.rows[0]["$ per Gbp"] == pytest.approx(3.6 / (2000.0 * 3600) * 1e9)  # $0.50
    assert report.rows[1]["$ per Gbp"] is None
    roof = BenchReport(name="r", title="t", columns=["item", "% of limit"])
    add_economics(roof, 1.0)
    assert "no throughput column" in roof.notes[-1]
    with pytest.raises(ValueError, match="price_per_hour"):
        add_economics(report, -1.0)
