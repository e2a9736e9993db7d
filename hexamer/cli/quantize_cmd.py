"""``hexamer quantize`` (write an int8 or int4 model folder) and ``hexamer bench quant`` (its speed and
fidelity against float32 / bfloat16); thin layers over :mod:`hexamer.model.quant` and
:mod:`hexamer.bench.quant`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import JsonFlag, app, bench_app, console, fail, print_json, resolve_model
from hexamer.cli.bench_cmd import ThreadsOption, _log, bench_folder, parse_ints
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output
from hexamer.cli.checks import not_stdio, path_option
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.sequence_jobs import set_threads


@app.command("quantize")
def quantize(
    source: Annotated[
        Path,
        typer.Argument(
            help="Float checkpoint folder (config.json + safetensors).",
            callback=not_stdio("a checkpoint is a folder of files"),
        ),
    ],
    out: Annotated[
        Path,
        typer.Argument(
            help="New folder to write (must not exist, or be empty).",
            callback=not_stdio("a checkpoint is a folder of files"),
        ),
    ],
    dtype: Annotated[
        Literal["int8", "int4"],
        typer.Option(help="Weight format: int8 (per-output-channel scales) or int4 (groups of 32)."),
    ] = "int8",
    as_json: JsonFlag = False,
) -> None:
    """Write an int8 or int4 copy of a model folder that hexamer loads directly (docs/quantization.md).

    Exit status 2 for what the user can fix (not a model folder, a broken or already quantized
    checkpoint, an output folder in the way), 1 when writing the folder fails (disk, a folder that
    does not load back); every error is one ``error:`` line."""
    from hexamer.model.quant import QUANT_METHOD, quantize_folder

    if not (source / "config.json").is_file():
        fail(f"{source} is not a model folder (no config.json)")
    try:
        folder = quantize_folder(source, out, bits=4 if dtype == "int4" else 8)
    except (ValueError, FileExistsError, FileNotFoundError) as exc:  # ModelFolderError is a ValueError
        fail(exc)
    except (OSError, RuntimeError) as exc:
        fail(f"writing {out} failed: {exc}", code=1)
    before = sum(p.stat().st_size for p in source.glob("*.safetensors"))
    after = (folder / "model.safetensors").stat().st_size
    summary = {
        "source": str(source),
        "out": str(folder),
        "quant_method": QUANT_METHOD,
        "dtype": dtype,
        "source_bytes": before,
        "out_bytes": after,
    }
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {folder} ({QUANT_METHOD}, {dtype}): weights {before / 1e6:,.1f} MB -> {after / 1e6:,.1f} MB"
        )


def _speed(batch_sizes: str, prompt_bp: int, new_bp: int, rounds: int) -> dict[str, Any]:
    sizes = parse_ints(batch_sizes, "--batch-sizes")
    return {"batch_sizes": sizes, "prompt_bp": prompt_bp, "new_bp": new_bp, "rounds": rounds}


#: ``bench quant``'s speed run: keywords of :func:`hexamer.bench.quant.run_quant_speed`
speed_options = option_group(
    "speed",
    (
        ("batch_sizes", Annotated[str, typer.Option(help="Speed: comma-separated batch sizes.")], "1,16"),
        ("prompt_bp", Annotated[int, typer.Option(min=6, max=100_000, help="Speed: prompt length.")], 1080),
        ("new_bp", Annotated[int, typer.Option(min=12, max=100_000, help="Speed: bases generated.")], 360),
        (
            "rounds",
            Annotated[int, typer.Option(min=1, max=100, help="Speed: alternating rounds (best kept).")],
            3,
        ),
    ),
    _speed,
)
#: ``bench quant --fidelity``: keywords of :func:`hexamer.bench.quant.run_quant_fidelity`
fidelity_options = option_group(
    "fidelity_run",
    (
        ("n_variants", Annotated[int, typer.Option(min=2, max=100_000, help="Fidelity: SNVs scored.")], 200),
        (
            "n_windows",
            Annotated[
                int, typer.Option(min=2, max=100_000, help="Fidelity: real (and as many corrupted) windows.")
            ],
            64,
        ),
        (
            "window_bp",
            Annotated[int, typer.Option(min=12, max=100_000, help="Fidelity: window length.")],
            600,
        ),
    ),
    dict,
)


@bench_app.command("quant")
@bench_output(plot=None)
@speed_options
@fidelity_options
def bench_quant(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model folder (default: --shape random weights; --fidelity: the demo model).",
        ),
    ] = None,
    shape: Annotated[
        str | None,
        typer.Option(help="Random-weight shape when no --model (tiny, 500m, ...; speed default 500m)."),
    ] = None,
    variants: Annotated[
        str, typer.Option(help="Comma-separated: float32,bfloat16,int8,int8-bf16,int8-a8,int4,int4-bf16.")
    ] = ("float32,bfloat16,int8,int8-bf16"),
    fidelity: Annotated[
        bool, typer.Option("--fidelity/--no-fidelity", help="Fidelity report vs float32 instead of speed.")
    ] = False,
    speed: dict[str, Any] = FILLED,  # the speed run's options (speed_options)
    gguf: Annotated[
        Path | None,
        path_option(
            "A llama.cpp Q8_0 GGUF of the same model: timed, or scored with --fidelity.",
            "llama.cpp loads a GGUF from a file by name",
        ),
    ] = None,
    gguf_quantize: Annotated[
        str | None,
        typer.Option(
            help="Make llama.cpp rows' GGUFs from the folder (comma-separated: q8_0, q4_k_m, q4_0): "
            "hexamer's f32 GGUF quantized by llama.cpp, cached beside the folder. Instead of --gguf; "
            "timed (every row in every round), or scored with --fidelity."
        ),
    ] = None,
    fidelity_run: dict[str, Any] = FILLED,  # the fidelity run's options (fidelity_options)
    threads: ThreadsOption = 0,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """int8 vs float32 vs bfloat16: decode/prefill speed (same run, alternating rounds) or fidelity."""
    from hexamer.bench.quant import (
        check_peer_gguf,
        check_variants,
        llama_cpp_scorers,
        load_variants,
        peer_ggufs,
        run_quant_fidelity,
        run_quant_speed,
    )

    qtypes = None if gguf_quantize is None else [q.strip() for q in gguf_quantize.split(",") if q.strip()]
    try:
        chosen = check_variants([v.strip() for v in variants.split(",") if v.strip()])
        check_peer_gguf(gguf, qtypes)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    set_threads(threads or None)  # 0: left as torch chose
    default = model is None and shape is None and fidelity  # the demo model scores, random weights time
    folder = resolve_model(None) if default else bench_folder(model, shape or "500m", "float32")
    try:  # before loading: conversion errors surface first, and it needs memory
        ggufs = peer_ggufs(folder, gguf, qtypes, n_threads=threads, log=_log)
    except (OSError, RuntimeError) as exc:  # converter missing, conversion or quantization failed
        fail(exc, code=1)
    carbons = load_variants(folder, chosen, max(speed["batch_sizes"]), _log)
    if fidelity:
        if fidelity_run["window_bp"] > 6 * (next(iter(carbons.values())).context_length - 4):
            raise typer.BadParameter(
                f"--window-bp {fidelity_run['window_bp']} does not fit the model's context"
            )
        peers, skipped = llama_cpp_scorers(ggufs, folder)
        report = run_quant_fidelity(
            carbons, model_name=Path(folder).name, peers=peers, peers_skipped=skipped, log=_log,
            **fidelity_run,
        )  # fmt: skip
    else:
        report = run_quant_speed(carbons, ggufs=ggufs, folder=folder, log=_log, **speed)
    output.emit(report)
