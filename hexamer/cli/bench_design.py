"""``hexamer bench design-evolve``: options parsed here, the run in :mod:`hexamer.bench.design`."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from hexamer.cli.app import bench_app, err_console
from hexamer.cli.bench_cmd import BenchModelOption, ThreadsOption, bench_folder
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output
from hexamer.cli.sequence_jobs import set_threads


def _log(msg: str) -> None:
    """A progress line on stderr (stdout carries only the table, or the JSON with ``-o -``)."""
    from rich.markup import escape

    err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)


@bench_app.command("design-evolve")
@bench_output("Also draw candidates/s per method (PNG).")
def bench_design_evolve_cmd(
    model: BenchModelOption = None,
    shape: Annotated[
        Literal["demo", "tiny", "500m", "3b", "8b"],
        typer.Option(help="No --model: the shipped demo model, or random weights of this shape."),
    ] = "demo",
    device: Annotated[
        str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda when present).")
    ] = None,
    length: Annotated[int, typer.Option(min=12, max=100_000, help="Bases of the evolved sequence.")] = 200,
    rounds: Annotated[
        int, typer.Option(min=3, max=1000, help="Timed rounds (alternating order; medians).")
    ] = 3,
    batch_size: Annotated[
        int, typer.Option(min=1, max=65536, help="Edited sequences per packed tail forward.")
    ] = 4096,
    token_budget: Annotated[
        int, typer.Option(min=64, max=1 << 24, help="Tail tokens per packed forward.")
    ] = 2048,
    seed: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="Seed of the random sequence.")] = 0,
    reference_sample: Annotated[
        int,
        typer.Option(
            min=0, max=300_000, help="Time the reference on this many seeded candidates, scaled (0: all)."
        ),
    ] = 0,
    stock: Annotated[
        bool, typer.Option(help="Also time one forward each through the library's stock scorer.")
    ] = False,
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """One evolution round over all single edits: shared-prefix likelihood scoring vs one forward
    per candidate (same scores, compared)."""
    from hexamer.bench.common import BenchOptionError
    from hexamer.bench.design import run_design_evolve_bench
    from hexamer.carbon import Carbon

    set_threads(threads or None)
    if model is None and shape == "demo":
        from hexamer.demo.paths import demo_model_path

        folder, name = str(demo_model_path()), "demo model"
    else:
        folder = bench_folder(model, shape, "float32")
        name = model or f"random {shape}"
    try:
        carbon = Carbon.from_pretrained(folder, device=device)
        report = run_design_evolve_bench(
            carbon,
            model_name=name,
            length=length,
            rounds=rounds,
            batch_size=batch_size,
            token_budget=token_budget,
            seed=seed,
            reference_sample=reference_sample,
            stock=stock,
            log=_log,
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc)) from exc
    output.emit(report, x="method", y="candidates/s")
