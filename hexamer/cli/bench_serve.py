"""``hexamer bench serve``: streamed serving throughput and latency against any OpenAI-compatible URL."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import bench_app, fail
from hexamer.cli.bench_cmd import _log
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output
from hexamer.cli.option_groups import FILLED, option_group

#: The workload of ``bench serve`` (prompts, lengths, arrivals, sampling), handed to the command
#: as one dict of :func:`hexamer.bench.serve.run_serve_bench` keywords.
workload_options = option_group(
    "workload",
    (
        ("num_prompts", Annotated[int, typer.Option(min=1)], 16),
        (
            "input_bp",
            Annotated[int, typer.Option(min=6, help="Prompt DNA (whole 6-mers after <dna>).")],
            1000,
        ),
        (
            "output_bp",
            Annotated[int, typer.Option(min=1, help="New DNA per request (ceil(bp/6) tokens).")],
            1000,
        ),
        (
            "input_len",
            Annotated[int | None, typer.Option(min=2, help="Prompt tokens instead of --input-bp.")],
            None,
        ),
        (
            "output_len",
            Annotated[int | None, typer.Option(min=1, help="New tokens instead of --output-bp.")],
            None,
        ),
        (
            "max_concurrency",
            Annotated[int | None, typer.Option(min=1, help="Requests in flight at most (default: all).")],
            None,
        ),
        (
            "request_rate",
            Annotated[float, typer.Option(help="Poisson arrival rate in req/s (default inf: all at once).")],
            math.inf,
        ),
        ("temperature", Annotated[float, typer.Option(min=0)], 0.0),
        ("seed", Annotated[int, typer.Option(help="Seed of the random prompts.")], 0),
    ),
    dict,
)


@bench_app.command("serve")
@workload_options
@bench_output("Also draw the latencies (PNG).")
def bench_serve_cmd(
    url: Annotated[
        str | None, typer.Option(help="A running vLLM / SGLang / hexamer server (default: start hexamer's).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Start hexamer's server in this process on this model folder."),
    ] = None,
    served_model: Annotated[
        str | None, typer.Option(help="Model name on the server (default: the first).")
    ] = None,
    api_key: Annotated[str | None, typer.Option(envvar="HEXAMER_API_KEY", help="Bearer API key.")] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="Local Carbon folder or hub id for the DNA token ids (default: served)."),
    ] = None,
    workload: dict[str, Any] = FILLED,  # the workload options (workload_options)
    endpoint: Annotated[
        Literal["completions", "dna"],
        typer.Option(
            help="completions (OpenAI, whole-vocabulary sampling) or dna (/v1/dna/generate, token mode: "
            "what `bench generate` measures)."
        ),
    ] = "completions",
    rounds: Annotated[
        int, typer.Option(min=1, max=100, help="Runs of the workload (the table is the last round's).")
    ] = 1,
    compare_offline: Annotated[
        bool,
        typer.Option(
            "--compare-offline/--no-compare-offline",
            help="hexamer's own server: after each round, run the same prompts on the offline engine "
            "(same model, token mode) and report server / offline.",
        ),
    ] = False,
    server_defaults: Annotated[
        bool,
        typer.Option(
            "--server-defaults/--sized-server",
            help="hexamer's own server: start it with its defaults (the model's context, 64 sequences, the "
            "default KV pool) instead of sized to the workload.",
        ),
    ] = False,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick/--no-quick", help="8 prompts, 60 bp in / out, 4 in flight (tiny model by default)."
        ),
    ] = False,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """The published serving workload (random DNA prompts, fixed lengths, ignore_eos), vLLM-style summary."""
    from hexamer.bench.serve import latency_plot, run_serve_bench
    from hexamer.remote import RemoteError

    try:
        report = run_serve_bench(
            url=url,
            model=model,
            served_model=served_model,
            api_key=api_key,
            tokenizer=tokenizer,
            quick=quick,
            endpoint=endpoint,
            rounds=rounds,
            compare_offline=compare_offline,
            server_defaults=server_defaults,
            log=_log,
            **workload,
        )
    except (RemoteError, ValueError, RuntimeError) as exc:
        fail(exc)
    output.emit(report, draw=latency_plot)  # drawn from the latency rows, before any price rows


@bench_app.command("serve-limits")
@bench_output(None)
def bench_serve_limits_cmd(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model folder to serve (default: the demo model).")
    ] = None,
    max_response_values: Annotated[
        int | None, typer.Option(min=1, help="The server's --max-response-values (default: its default).")
    ] = None,
    max_logprobs: Annotated[
        int | None, typer.Option(min=1, help="The server's --max-logprobs (default: its default).")
    ] = None,
    score_sequences: Annotated[
        int, typer.Option(min=1, help="Sequences of the score request (the server's max_prompts: 256).")
    ] = 64,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """The largest requests `hexamer serve` admits, one kind at a time: server RSS (idle, peak, after) and
    /health latency during each (Linux: reads /proc)."""
    from hexamer.bench.serve_limits import run_serve_limits_bench

    given = {"max_response_values": max_response_values, "max_logprobs": max_logprobs}
    try:
        report = run_serve_limits_bench(
            model=model,
            server_options={k: v for k, v in given.items() if v is not None},
            score_sequences=score_sequences,
            log=_log,
        )
    except (ValueError, RuntimeError, OSError) as exc:
        fail(exc)
    output.emit(report)
