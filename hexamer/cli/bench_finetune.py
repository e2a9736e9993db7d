"""``hexamer bench finetune``: options parsed here, the run in :mod:`hexamer.bench.finetune`."""

from __future__ import annotations

from typing import Annotated

import typer

from hexamer.cli.app import bench_app, err_console
from hexamer.cli.bench_cmd import BenchModelOption, ShapeOption, ThreadsOption, parse_names
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output


def _log(msg: str) -> None:
    """A progress line on stderr (stdout carries only the table, or the JSON with ``-o -``)."""
    from rich.markup import escape

    err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)


@bench_app.command("finetune")
@bench_output("Also draw examples/s per case (PNG).")
def bench_finetune_cmd(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    methods: Annotated[str, typer.Option(help="Comma-separated: full, lora, probe.")] = "full,lora,probe",
    peer: Annotated[
        bool,
        typer.Option("--peer/--no-peer", help="Also time transformers.Trainer (+ peft for LoRA)."),
    ] = True,
    batch_size: Annotated[int, typer.Option(min=1, max=4096, help="Rows per optimizer step.")] = 16,
    length: Annotated[int, typer.Option(min=6, max=1_000_000, help="Bases per row (Malinois: 230).")] = 230,
    rows: Annotated[
        int, typer.Option(min=1, max=10_000_000, help="Rows of an epoch (the probe's features, s/epoch).")
    ] = 64,
    steps: Annotated[int, typer.Option(min=1, max=100_000, help="Timed steps per case and round.")] = 2,
    warmup_steps: Annotated[
        int, typer.Option(min=1, max=1000, help="Untimed steps first, in every process.")
    ] = 1,
    epochs: Annotated[int, typer.Option(min=1, max=1000, help="Probe: epochs of head training.")] = 3,
    rounds: Annotated[
        int, typer.Option(min=3, max=1000, help="Rounds (alternating order; medians reported).")
    ] = 3,
    lora_rank: Annotated[int, typer.Option(min=1, max=4096, help="LoRA rank (alpha = 2 × rank).")] = 8,
    threads: ThreadsOption = 0,
    precision: Annotated[
        str,
        typer.Option(
            help="fp32; bf16 (both sides under bfloat16 autocast: hexamer's bf16, the Trainer's "
            "bf16=True); both (each precision in the same rounds, each side against its own kind).",
        ),
    ] = "fp32",
    quick: Annotated[
        bool, typer.Option("--quick/--no-quick", help="Seconds per case: tiny shape, 32 rows, 2 steps.")
    ] = False,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Training examples/s of hexamer's fit (full, LoRA) vs transformers.Trainer, the probe's time per
    epoch vs full fine-tuning's, and each case's peak RSS (one fresh process per case and round)."""
    from hexamer.bench.common import BenchOptionError
    from hexamer.bench.finetune import METHODS, run_finetune_bench

    chosen = parse_names(methods, "--methods", METHODS)
    try:
        report = run_finetune_bench(
            model=model,
            shape=shape,
            methods=chosen,
            peer=peer,
            batch_size=batch_size,
            length=length,
            rows=rows,
            steps=steps,
            warmup_steps=warmup_steps,
            epochs=epochs,
            rounds=rounds,
            lora_rank=lora_rank,
            threads=threads,
            precision=precision,
            quick=quick,
            log=_log,
        )
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc)) from exc
    output.emit(report, x="case", y="examples/s", log_y=True)
