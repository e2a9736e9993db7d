"""``hexamer bench serve``: the workload, the vLLM-style summary, and runs against real servers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.bench.serve import RequestResult, random_prompts, run_serve_bench, summarize, token_lengths
from hexamer.testing.cli import error_message, run, run_ok
from hexamer.tokenizer import DnaLayout
from tests.remote.fake_server import FakeSettings, make_app, serve


@pytest.fixture(scope="module")
def local(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def test_published_shape() -> None:
    assert token_lengths(1000, 1000) == (167, 167)  # <dna> + 166 6-mers (996 bp); ceil(1000 / 6)
    assert token_lengths(60, 60) == (11, 10)
    with pytest.raises(ValueError):
        token_lengths(5, 10)


def test_random_prompts_are_dna_and_seeded() -> None:
    lay = DnaLayout(dna_start_id=426)
    a = random_prompts(3, 20, lay, seed=1)
    assert a == random_prompts(3, 20, lay, seed=1) != random_prompts(3, 20, lay, seed=2)
    assert all(len(p) == 20 and p[0] == lay.begin_id for p in a)
    assert all(lay.kmer_start <= t < lay.kmer_stop for p in a for t in p[1:])


def test_summary_matches_a_hand_computation() -> None:
    results = [
        RequestResult(ok=True, prompt_len=10, output_len=5, ttft=0.1, latency=0.5, itls=[0.1, 0.1, 0.1, 0.1]),
        RequestResult(ok=True, prompt_len=10, output_len=3, ttft=0.3, latency=0.7, itls=[0.2, 0.2]),
        RequestResult(ok=False, prompt_len=10, error="HTTP 503"),
    ]
    s = summarize(results, duration=2.0)
    assert (s["completed"], s["failed"], s["first_error"]) == (2, 1, "HTTP 503")
    assert s["output_throughput"] == pytest.approx(4.0) and s["output_bp_throughput"] == pytest.approx(24.0)
    assert s["total_token_throughput"] == pytest.approx(14.0) and s["request_throughput"] == pytest.approx(
        1.0
    )
    assert s["mean_ttft_ms"] == pytest.approx(200.0) and s["median_ttft_ms"] == pytest.approx(200.0)
    assert s["mean_tpot_ms"] == pytest.approx((400 / 4 + 400 / 2) / 2)
    itl = np.array([0.1] * 4 + [0.2] * 2) * 1000
    assert s["mean_itl_ms"] == pytest.approx(itl.mean()) and s["p99_itl_ms"] == pytest.approx(
        np.percentile(itl, 99)
    )
    assert s["p99_e2el_ms"] == pytest.approx(np.percentile([500, 700], 99))


def test_against_a_vllm_format_server(local: Carbon, tiny_folder: Path) -> None:
    with serve(make_app(local, FakeSettings())) as url:
        report = run_serve_bench(
            url=url, tokenizer=str(tiny_folder), num_prompts=5, input_len=7, output_len=4
        )
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 5 and rows["failed"]["value"] == 0
    assert rows["total_input_tokens"]["value"] == 35 and rows["total_output_tokens"]["value"] == 20
    assert rows["output_bp_throughput"]["value"] == pytest.approx(6 * rows["output_throughput"]["value"])
    assert 0 < rows["ttft"]["median"] <= rows["e2el"]["median"]
    assert "vllm" in report.title


def test_quick_on_hexamer_server_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    lines: list[str] = []
    report = run_serve_bench(quick=True, log=lines.append)
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 8 and rows["total_output_tokens"]["value"] == 80
    assert "hexamer server in this process" in lines[0]
    assert "on hexamer" in report.title and report.machine["cpu_count"]


def test_cli_bench_serve(local: Carbon, tiny_folder: Path, tmp_path: Path) -> None:
    with serve(make_app(local, FakeSettings(api_key="k"))) as url:
        args = ["bench", "serve", "--url", url, "--tokenizer", str(tiny_folder), "--quick", "--api-key", "k"]
        run_ok(
            [
                *args,
                "-o",
                str(tmp_path / "s.json"),
                "--plot",
                str(tmp_path / "s.png"),
                "--price-per-hour",
                "3",
            ]
        )
        data = json.loads((tmp_path / "s.json").read_text())
        metrics = {r["metric"]: r for r in data["rows"]}
        assert {"Output token throughput (tok/s)", "TPOT (ms)"} <= set(metrics)
        per_hour = metrics["Output throughput (bp/s)"]["value"] * 3600
        assert metrics["Output per hour (bp)"]["value"] == pytest.approx(per_hour)
        assert metrics["$ per Gbp at $3/hour"]["value"] == pytest.approx(3 / per_hour * 1e9)
        assert {r["key"] for r in data["rows"]} >= {
            "output_throughput",
            "ttft",
            "itl",
            "output_bp_throughput",
        }
        assert (tmp_path / "s.png").stat().st_size > 0
        bad = run(args[:-2])  # no API key
        assert bad.exit_code == 2 and "HTTP 401" in error_message(bad)
    both = run(["bench", "serve", "--url", "http://x", "--model", str(tiny_folder)])
    assert both.exit_code == 2 and "not both" in error_message(both)


def test_errors_inside_the_stream_are_reported(local: Carbon, tiny_folder: Path) -> None:
    expected = r"warm-up request to .*/v1/completions failed: RuntimeError: engine died"
    with (
        serve(make_app(local, FakeSettings(stream_error="engine died"))) as url,
        pytest.raises(RuntimeError, match=expected),
    ):
        run_serve_bench(url=url, tokenizer=str(tiny_folder), quick=True)


def test_dna_endpoint_on_hexamer_server_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    report = run_serve_bench(quick=True, endpoint="dna")
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 8 and rows["failed"]["value"] == 0
    assert rows["total_output_tokens"]["value"] == 80 and rows["total_input_tokens"]["value"] == 88
    assert "/v1/dna/generate" in report.title
    with pytest.raises(ValueError, match="endpoint"):
        run_serve_bench(quick=True, endpoint="chat")


def test_dna_endpoint_against_the_offline_engine_in_alternating_rounds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_folder: Path
) -> None:
    """--compare-offline: the same prompts on the offline engine after each server round; the
    server is sized to the work (max_model_len = prompt + new tokens: every request gets a row)."""
    lines: list[str] = []
    report = run_serve_bench(
        model=str(tiny_folder), num_prompts=4, input_bp=60, output_bp=60, endpoint="dna", rounds=2,
        compare_offline=True, log=lines.append,
    )  # fmt: skip
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 4 and rows["total_output_tokens"]["value"] == 40
    assert len(rows["offline_throughput"]["rounds"]) == 2 and rows["offline_throughput"]["value"] > 0
    ratios = rows["server_vs_offline"]["rounds"]
    assert len(ratios) == 2 and all(x > 0 for x in ratios)
    assert any("max_model_len 29" in n for n in report.notes)  # 11 prompt + 10 new tokens + 8
    assert sum("offline engine" in line for line in lines) == 2
    with pytest.raises(ValueError, match="own server"):
        run_serve_bench(url="http://127.0.0.1:9", compare_offline=True)


def test_each_round_sends_new_prompts_after_a_warm_up_of_its_own() -> None:
    from hexamer.bench.serve import _Plan, round_workload

    layout = DnaLayout(dna_start_id=426)
    plan = _Plan(4, 11, 10, 4, float("inf"), 0.0, 7, "dna", 2)
    first, second = round_workload(plan, layout, 0), round_workload(plan, layout, 1)
    assert len(first.prompts) == 4 and first.warm_prompt not in first.prompts
    assert not {tuple(p) for p in first.prompts} & {tuple(p) for p in second.prompts}
    assert round_workload(plan, layout, 1) == second  # seeded


def test_a_server_with_its_defaults_runs_every_request_at_once(tiny_folder: Path) -> None:
    """--server-defaults: hexamer's server as started by `hexamer serve` (the model's context per
    sequence, 64 sequences, the default KV pool); /health says how many requests ran at once."""
    report = run_serve_bench(
        model=str(tiny_folder), num_prompts=8, input_bp=60, output_bp=600, endpoint="dna", rounds=2,
        server_defaults=True,
    )  # fmt: skip
    rows = {r["key"]: r for r in report.rows}
    assert rows["completed"]["value"] == 8 and rows["failed"]["value"] == 0
    assert len(rows["peak_running"]["rounds"]) == 2 and 0 < rows["peak_running"]["value"] <= 8
    assert any("its defaults" in n for n in report.notes)
    assert not any("max_model_len 2" in n for n in report.notes)
