"""``hexamer bench report``: size and opening time of a ``hexamer report`` in headless Chromium."""

from __future__ import annotations

from typing import Annotated

import typer

from hexamer.cli.app import bench_app, err_console, fail
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output


@bench_app.command("report")
@bench_output(plot=None, legacy_json=False)
def bench_report(
    variants: Annotated[
        int, typer.Option(min=1, max=100_000, help="Random scored SNVs in the report.")
    ] = 1_000,
    flank: Annotated[int, typer.Option(min=0, max=5_000, help="Bases embedded each side of a variant.")] = 60,
    repeats: Annotated[int, typer.Option(min=1, help="Timed rounds after a warm-up (at least 3).")] = 3,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """How big a report of N variants is and how long headless Chromium takes to open it."""
    from hexamer.bench.view_report import run_report_bench

    try:
        report = run_report_bench(
            n_variants=variants,
            flank=flank,
            repeats=repeats,
            log=lambda m: err_console.print(m, highlight=False),
        )
    except RuntimeError as exc:
        fail(exc)
    output.emit(report)
