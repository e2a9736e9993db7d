"""``hexamer bench tokenizer|generate|throughput|fns|roofline|track|all``: parse options, run, print, save.

Every table goes through :class:`hexamer.bench.report.BenchReport`: printed with rich, and on request
written as JSON (``--json``), plotted (``--plot``) or both into a folder (``--out``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import (
    ModelOption,
    bench_app,
    cache_dir,
    console,
    err_console,
    load_tokenizer,
)
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, JsonOption, PriceOption, bench_output, emit
from hexamer.cli.checks import fasta_option, path_option
from hexamer.cli.sequence_jobs import set_threads

Shape = Literal["tiny", "500m", "3b", "8b"]  # hexamer.synthetic.SHAPES
ShapeOption = Annotated[Shape, typer.Option(help="Random-weight shape when no --model.")]
DtypeOption = Annotated[
    Literal["float32", "bfloat16"], typer.Option(help="Weights' dtype, used by every backend.")
]
BenchModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="Model folder (default: random weights, --shape).")
]
FastaOption = Annotated[
    Path | None, fasta_option("Reference FASTA (default: the shipped human chr20 slice).")
]
ThreadsOption = Annotated[int, typer.Option(min=0, max=4096, help="torch threads (0: torch's default).")]
BatchSizesOption = Annotated[str, typer.Option(help="Comma-separated batch sizes.")]
MedianRepeatsOption = Annotated[
    int, typer.Option(min=1, help="Timed rounds after a warm-up (at least 3; medians reported).")
]


def _split_numbers(text: str, option: str, convert: Callable[[str], Any], kind: str) -> tuple[Any, ...]:
    """The comma-separated numbers of ``text``, or a usage error naming the option and ``kind``."""
    try:
        return tuple(convert(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise typer.BadParameter(f"{option} must be {kind} separated by commas, got {text!r}") from exc


def parse_ints(text: str, option: str) -> tuple[int, ...]:
    """``--batch-sizes 16,1`` as positive integers, or a usage error naming the option."""
    values = _split_numbers(text, option, int, "integers")
    if not values or min(values) < 1:
        raise typer.BadParameter(f"{option} needs at least one positive integer, got {text!r}")
    return values


def parse_floats(text: str, option: str) -> tuple[float, ...]:
    """``--noises 0,0.1`` as numbers >= 0, or a usage error naming the option."""
    values = _split_numbers(text, option, float, "numbers")
    if not values or min(values) < 0:
        raise typer.BadParameter(f"{option} needs at least one number >= 0")
    return values


def parse_names(text: str, option: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """``--backends a,b`` as names out of ``allowed`` (listed in its order by the usage error)."""
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values or not set(values) <= set(allowed):
        raise typer.BadParameter(f"{option} must be a comma-separated subset of {list(allowed)}")
    return values


def _check_dtype(dtype: str) -> None:
    if dtype not in ("float32", "bfloat16"):
        raise typer.BadParameter("--dtype must be float32 or bfloat16")


def bench_folder(model: str | None, shape: str, dtype: str) -> str:
    """``--model`` as given, else a cached random-weight folder of ``--shape`` with the real vocabulary."""
    if model is not None:
        return model
    from hexamer.bench.common import bench_model_folder
    from hexamer.synthetic import SHAPES

    if shape not in SHAPES:
        raise typer.BadParameter(f"--shape must be one of {sorted(SHAPES)}")
    _log(f"building/using a random-weight {shape} model with the real Carbon vocabulary")
    return str(bench_model_folder(shape, cache_dir(), dtype))


def _bench_setup(
    model: str | None, shape: str, dtype: str, batch_sizes: str, threads: int = 0
) -> tuple[str, tuple[int, ...]]:
    """The bench folder and the checked ``--batch-sizes``, with torch's threads set (0: left alone)."""
    _check_dtype(dtype)
    sizes = parse_ints(batch_sizes, "--batch-sizes")
    set_threads(threads or None)  # 0: left as torch chose
    return bench_folder(model, shape, dtype), sizes


def _log(msg: str) -> None:
    """A progress line, on stderr: stdout carries only the table, or only the JSON with ``--out -``."""
    from rich.markup import escape

    err_console.print(f"[dim]{escape(msg)}[/dim]", highlight=False)


@bench_app.command("tokenizer")
@bench_output()
def bench_tokenizer(
    model: ModelOption = None,
    sizes: Annotated[str, typer.Option(help="Comma-separated sequence lengths in bp.")] = "1000000,100000000",
    repeats: Annotated[int, typer.Option(min=1, help="Runs per case; the best is reported.")] = 3,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """DNA encode/decode throughput (Mbp/s), with the official per-chunk algorithm as the peer."""
    from hexamer.bench.tokenizer import run_tokenizer_bench, tokenizer_report

    size_list = list(_split_numbers(sizes, "--sizes", lambda s: int(float(s)), "numbers"))
    if not size_list or min(size_list) <= 0:
        raise typer.BadParameter("--sizes needs at least one positive length")
    tok = load_tokenizer(model)
    rows = run_tokenizer_bench(tok, size_list, repeats=repeats)
    output.emit(tokenizer_report(rows, repeats))


@bench_app.command("generate")
@bench_output()
def bench_generate(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    batch_sizes: BatchSizesOption = "16,1",
    prompt_bp: Annotated[int, typer.Option(min=6)] = 1080,
    new_bp: Annotated[int, typer.Option(min=1)] = 1080,
    dtype: DtypeOption = "float32",
    backends: Annotated[
        str, typer.Option(help="Comma-separated: hexamer-token, hexamer-bp, transformers.")
    ] = "hexamer-token,hexamer-bp,transformers",
    hf_static_cache: Annotated[bool, typer.Option(help="Run transformers with its static cache.")] = False,
    repeats: MedianRepeatsOption = 3,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Generation bp/s: hexamer token level, hexamer bp level and transformers.generate, same run."""
    from hexamer.bench.generate import generate_report, run_generate_bench

    chosen = parse_names(backends, "--backends", sorted({"hexamer-token", "hexamer-bp", "transformers"}))
    folder, sizes = _bench_setup(model, shape, dtype, batch_sizes)
    rows = run_generate_bench(
        folder,
        batch_sizes=sizes,
        prompt_bp=prompt_bp,
        new_bp=new_bp,
        dtype=dtype,
        backends=chosen,
        hf_static_cache=hf_static_cache,
        repeats=repeats,
        log=_log,
    )
    report = generate_report(rows, prompt_bp=prompt_bp, new_bp=new_bp, dtype=dtype, repeats=repeats)
    output.emit(report)


@bench_app.command("throughput")
@bench_output()
def bench_throughput(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    dtype: DtypeOption = "float32",
    batch_sizes: BatchSizesOption = "16,1",
    prompt_bp: Annotated[int, typer.Option(min=6, help="Prompt length (a multiple of 6).")] = 1080,
    new_bp: Annotated[int, typer.Option(min=1, help="Bases to generate per prompt.")] = 1080,
    backends: Annotated[
        str,
        typer.Option(
            help="Comma-separated: hexamer-token, hexamer-bp, transformers, transformers-static, llama.cpp."
        ),
    ] = "hexamer-token,hexamer-bp,transformers,transformers-static,llama.cpp",
    repeats: Annotated[
        int, typer.Option(min=1, help="Rounds; each backend keeps its best time per case.")
    ] = 1,
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """The Trainium2 article's DNA suite (7 prompt cases): kbp/s, latency p50/p99, valid DNA % per backend."""
    from hexamer.bench.throughput import BACKENDS, make_backends, run_throughput_bench

    chosen = parse_names(backends, "--backends", BACKENDS)
    if prompt_bp % 6:
        raise typer.BadParameter(f"--prompt-bp must be a multiple of 6, got {prompt_bp}")
    folder, sizes = _bench_setup(model, shape, dtype, batch_sizes, threads)
    objs = make_backends(folder, chosen, dtype=dtype, max_batch=max(sizes), log=_log)
    report = run_throughput_bench(
        objs,
        batch_sizes=sizes,
        prompt_bp=prompt_bp,
        new_bp=new_bp,
        repeats=repeats,
        title=f"DNA suite ({shape if model is None else Path(model).name}, {dtype}): "
        f"{prompt_bp} bp in / {new_bp} bp out, end to end, best of {repeats}",
        log=_log,
    )
    output.emit(report)


def _bench_carbon(
    model: str | None, shape: str, dtype: str, batch_sizes: str, threads: int
) -> tuple[Any, tuple[int, ...]]:
    """The checked batch sizes and a CPU ``Carbon`` on the bench folder (the fns/roofline set-up)."""
    import torch

    from hexamer import Carbon

    folder, sizes = _bench_setup(model, shape, dtype, batch_sizes, threads)
    carbon = Carbon.from_pretrained(
        folder, dtype=getattr(torch, dtype), device="cpu", max_batch_size=max(sizes)
    )
    return carbon, sizes


@bench_app.command("fns")
@bench_output()
def bench_fns(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    dtype: DtypeOption = "float32",
    batch_sizes: BatchSizesOption = "16,1",
    new_bp: Annotated[int, typer.Option(min=1, help="Bases generated per prompt.")] = 360,
    score_sequences: Annotated[int, typer.Option(min=1, help="Sequences scored.")] = 16,
    score_bp: Annotated[int, typer.Option(min=6, help="Length of each scored sequence.")] = 1080,
    repeats: MedianRepeatsOption = 3,
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Cost of base-pair-level (FNS) generation and scoring over token level, same model and run."""
    from hexamer.bench.fns_cost import run_fns_bench
    from hexamer.bench.run_all import add_plot_labels

    carbon, sizes = _bench_carbon(model, shape, dtype, batch_sizes, threads)
    report = run_fns_bench(
        carbon,
        batch_sizes=sizes,
        new_bp=new_bp,
        score_sequences=score_sequences,
        score_bp=score_bp,
        repeats=repeats,
        log=_log,
    )
    output.emit(add_plot_labels(report))


@bench_app.command("scaleout")
def bench_scaleout_cmd(
    model: BenchModelOption = None,
    shape: ShapeOption = "tiny",
    fasta: FastaOption = None,
    sites: Annotated[int, typer.Option(min=2, max=100_000, help="Random SNV sites.")] = 384,
    window: Annotated[int, typer.Option(min=12, max=1_000_000, help="Window recipe: bp.")] = 4096,
    shard_records: Annotated[int, typer.Option(min=1, max=1_000_000, help="Records per shard.")] = 32,
    rounds: Annotated[int, typer.Option(min=3, max=100, help="Timed rounds (after a warm-up).")] = 3,
    ray: Annotated[str, typer.Option("--ray", help="auto, local or a cluster address.")] = "auto",
    json_out: JsonOption = None,
) -> None:
    """VEP throughput in one process vs Ray with 1 and 2 single-thread workers (overhead, scaling)."""
    from hexamer.bench.scaleout import bench_scaleout
    from hexamer.demo import demo_data_files
    from hexamer.distributed import RayUnavailableError, require_ray

    try:
        require_ray()
    except RayUnavailableError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--ray'") from exc
    folder = bench_folder(model, shape, "float32")
    reference = fasta or next(p for p in demo_data_files() if "chr20" in p.name)
    report = bench_scaleout(
        folder,
        reference,
        sites=sites,
        window=window,
        block_records=shard_records,
        shard_records=shard_records,
        rounds=rounds,
        address=ray,
        log=_log,
    )
    emit(report, json_out, None)


@bench_app.command("roofline")
@bench_output()
def bench_roofline(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    dtype: DtypeOption = "float32",
    batch_sizes: BatchSizesOption = "1,16",
    new_bp: Annotated[int, typer.Option(min=6, help="Bases generated per run (decode steps × 6).")] = 360,
    repeats: Annotated[int, typer.Option(min=1)] = 3,
    quick: Annotated[bool, typer.Option(help="Smaller bandwidth/matmul probes.")] = False,
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Measure memory bandwidth and matmul FLOP/s, then decode/prefill as a fraction of those limits."""
    from hexamer.bench.roofline import run_roofline_bench
    from hexamer.bench.run_all import add_plot_labels

    carbon, sizes = _bench_carbon(model, shape, dtype, batch_sizes, threads)
    report = run_roofline_bench(
        carbon, batch_sizes=sizes, new_bp=new_bp, repeats=repeats, quick=quick, log=_log
    )
    output.emit(add_plot_labels(report))


@bench_app.command("track")
@bench_output(plot=None, legacy_json=False)
def bench_track(
    model: BenchModelOption = None,
    shape: ShapeOption = "500m",
    dtype: DtypeOption = "float32",
    bp: Annotated[int, typer.Option(min=6, max=10**9, help="Random bases tracked per run.")] = 12_288,
    window: Annotated[
        int | None,
        typer.Option(min=6, help="Window in bp, a multiple of 6 (default 6,144; 0 = the context)."),
    ] = 6_144,
    stride: Annotated[
        int | None, typer.Option(min=6, help="Stride in bp (default: half the window).")
    ] = None,
    repeats: Annotated[int, typer.Option(min=1, help="Timed rounds after a warm-up (at least 3).")] = 3,
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """bp/s of `hexamer track` and the fraction of the machine's matmul peak it reaches."""
    from hexamer.bench.track import run_track_bench

    carbon, _ = _bench_carbon(model, shape, dtype, "1", threads)
    try:
        report = run_track_bench(
            carbon, bp=bp, window=window or None, stride=stride, repeats=repeats, log=_log
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    output.emit(report)


@bench_app.command("all")
def bench_all(
    out: Annotated[
        Path,
        path_option(
            "Folder for the JSON, PNGs and summary.md.",
            "it is a folder of several files (JSON, PNG, summary.md)",
            "--out",
            "-o",
        ),
    ],
    model: BenchModelOption = None,
    shape: Annotated[
        Shape | None, typer.Option(help="Random-weight shape (default: tiny with --quick, else 500m).")
    ] = None,
    dtype: DtypeOption = "float32",
    quick: Annotated[
        bool, typer.Option(help="Small shape, short outputs, 3 rounds: minutes on a CPU.")
    ] = False,
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated subset: tokenizer, generate, throughput, fns, roofline, spec, serve, llamacpp, "
            "finetune."
        ),
    ] = None,
    threads: ThreadsOption = 0,
    price_per_hour: PriceOption = None,
) -> None:
    """Every bench table in one run; each writes JSON (+ PNG) into --out, plus a Markdown summary."""
    from hexamer.bench.run_all import EXTERNAL, PLOTS, run_all

    _check_dtype(dtype)
    names = sorted(set(PLOTS) | set(EXTERNAL))
    chosen = None if only is None else set(parse_names(only, "--only", names))
    set_threads(threads or None)  # 0: left as torch chose
    folder = bench_folder(model, shape or ("tiny" if quick else "500m"), dtype)
    outcomes = run_all(
        out,
        folder=folder,
        quick=quick,
        dtype=dtype,
        only=chosen,
        command=" ".join(["hexamer", *sys.argv[1:]]),
        log=_log,
        price_per_hour=price_per_hour,
    )
    from rich.markup import escape

    from hexamer.bench.report import print_report

    for o in outcomes:
        if o.report is not None:
            print_report(o.report, console)
        else:
            console.print(f"[yellow]{o.name}: {o.status}[/yellow] — {escape(o.reason)}")
    console.print(f"wrote {out / 'summary.md'} and {sum(len(o.files) for o in outcomes)} files")
    if any(o.status == "failed" for o in outcomes if o.name in PLOTS):
        raise typer.Exit(1)
