"""``hexamer bench serve-limits``: reading a process's memory, and one short run of the real
command against a server with small limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hexamer.bench.serve_limits import proc_status_kb, reset_peak, run_serve_limits_bench


def test_reads_this_process_memory() -> None:
    rss = proc_status_kb(os.getpid(), "VmRSS")
    assert rss is not None and rss > 10 * 2**20
    assert proc_status_kb(os.getpid(), "NoSuchField") is None
    assert proc_status_kb(2**30, "VmRSS") is None  # no such process
    if reset_peak(os.getpid()):
        peak = proc_status_kb(os.getpid(), "VmHWM")
        assert peak is not None and peak <= rss + 64 * 2**20


def test_score_sequences_is_checked() -> None:
    with pytest.raises(ValueError, match="score_sequences"):
        run_serve_limits_bench(score_sequences=0)


@pytest.mark.slow
def test_a_short_run_reports_every_case(tiny_folder: Path) -> None:
    report = run_serve_limits_bench(
        model=str(tiny_folder), server_options={"max_response_values": 20_000, "max_logprobs": 64},
        score_sequences=4,
    )  # fmt: skip
    cases = {row["case"]: row for row in report.rows}
    assert set(cases) == {"logprobs", "prompt_logprobs", "prompt_logprobs x3", "score per_position",
                          "over the bound"}  # fmt: skip
    assert cases["over the bound"]["status"] == 400
    for name, row in cases.items():
        if name != "over the bound":
            assert row["status"] == 200 and row["response MB"] > 0
            assert row["/health max ms"] is not None and row["RSS peak MiB"] > 0
