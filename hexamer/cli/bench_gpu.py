"""``hexamer bench gpu``: verify and benchmark a CUDA device in one command (docs/gpu.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hexamer.cli.app import bench_app, err_console, fail, print_json
from hexamer.cli.checks import path_option


@bench_app.command("gpu")
def bench_gpu_cmd(
    device: Annotated[
        str,
        typer.Option("--device", help="cuda, cuda:N, or cpu (a dry run of the same code on tiny shapes)."),
    ] = "cuda",
    quick: Annotated[
        bool, typer.Option("--quick/--no-quick", help="At most ~3 minutes on an H100-class GPU (full: ~8).")
    ] = False,
    out: Annotated[
        Path,
        path_option(
            "Folder for gpu-report.json and gpu-report.md.", "it is a folder of two files", "--out", "-o"
        ),
    ] = Path("gpu-report"),
    steps: Annotated[
        str | None, typer.Option("--steps", help="Comma-separated subset of the steps to run (default: all).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a one-line JSON summary on stdout.")] = False,
) -> None:
    """Environment and ceilings, correctness against transformers and the CPU engine, then
    throughput, scoring, decode bandwidth and speculative decoding; each step timed, a failing one
    reported and the next run. Exit status 1 when a check failed or a step raised."""
    from hexamer.bench.gpu import JSON_NAME, MD_NAME, run_gpu_bench

    only = None if steps is None else tuple(s.strip() for s in steps.split(",") if s.strip())
    say = (lambda _m: None) if as_json else (lambda m: err_console.print(m, markup=False))
    try:
        doc = run_gpu_bench(out, device=device, quick=quick, only=only, log=say)
    except ValueError as exc:
        fail(exc)
    statuses = {s["name"]: s["status"] for s in doc["steps"]}
    bad = sorted(name for name, status in statuses.items() if status in ("failed", "error"))
    if as_json:
        print_json({"out": str(out), "seconds": doc["seconds"], "steps": statuses, "targets": doc["targets"]})
    else:
        err_console.print(
            f"{out / MD_NAME} and {out / JSON_NAME} written ({doc['seconds']:.0f} s)", markup=False
        )
    if bad:
        raise typer.Exit(1)
