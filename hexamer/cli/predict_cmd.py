"""``hexamer predict``: a fine-tuned head folder applied to sequences, BED regions or a VCF; a thin
layer over :mod:`hexamer.finetune.apply` and :mod:`hexamer.finetune.effects`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from hexamer.cli.app import (
    CpuThreadsOption,
    JsonFlag,
    app,
    console,
    describe_counts,
    err_console,
    fail,
    print_json,
)
from hexamer.cli.checks import MAX_BATCH_SIZE, check_runtime, check_vep_settings
from hexamer.cli.ray_options import RayRun, ray_options
from hexamer.cli.sequence_jobs import fail_if_none_ok, set_threads

if TYPE_CHECKING:
    from hexamer.vep.job import VepRunResult

__all__ = ["predict"]


def _check_inputs(
    input_file: Path | None, bed: Path | None, vcf: Path | None, fasta: Path | None, resume: bool
) -> str:
    """Which job the options ask for (``sequences``, ``regions``, ``variants``), or a usage error."""
    given = [name for name, v in (("--input", input_file), ("--bed", bed), ("--vcf", vcf)) if v is not None]
    if len(given) != 1:
        raise typer.BadParameter(
            "give exactly one of --input, --bed and --vcf" + (f" (got {', '.join(given)})" if given else "")
        )
    job = {"--input": "sequences", "--bed": "regions", "--vcf": "variants"}[given[0]]
    if job == "sequences" and fasta is not None:
        raise typer.BadParameter("--fasta goes with --bed or --vcf, not --input", param_hint="'--fasta'")
    if job != "sequences" and fasta is None:
        raise typer.BadParameter(f"{given[0]} needs the reference: add --fasta", param_hint="'--fasta'")
    if resume and job != "variants":
        raise typer.BadParameter("--resume is for --vcf jobs (sequence jobs are written in one pass)")
    for option, path in ((given[0], input_file or bed or vcf), ("--fasta", fasta)):
        if path is not None and str(path) == "-" and option != "--input":
            raise typer.BadParameter("standard input is for --input; give a file", param_hint=f"'{option}'")
        if path is not None and str(path) != "-" and not path.is_file():
            raise typer.BadParameter(f"{str(path)!r} is not a file", param_hint=f"'{option}'")
    return job


def _check_out(out: Path, job: str) -> None:
    from hexamer.io import table_format
    from hexamer.vep.output import output_kind

    try:
        output_kind(out) if job == "variants" else table_format(out)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--out'") from None
    if not out.parent.is_dir():
        raise typer.BadParameter(f"output folder {str(out.parent)!r} does not exist", param_hint="'--out'")


@app.command()
@ray_options(
    Annotated[
        int | None,
        typer.Option(min=1, help="--ray: records per shard, a multiple of 50,000 (default 50,000)."),
    ]
)
def predict(
    model: Annotated[str, typer.Option("--model", "-m", help="A fine-tuned head folder (hexamer finetune).")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help=".parquet, .tsv, .csv or .jsonl; with --vcf also .vcf, .vcf.gz or .bcf."
        ),
    ],
    input_file: Annotated[
        Path | None,
        typer.Option(
            "--input", "-i", help="Sequences: FASTA/FASTQ/txt/TSV/CSV/Parquet; - reads FASTA from stdin."
        ),
    ] = None,
    bed: Annotated[
        Path | None, typer.Option("--bed", help="Regions (BED, strand in column 6), with --fasta.")
    ] = None,
    vcf: Annotated[
        Path | None,
        typer.Option("--vcf", help="Variant effects: prediction(alt) - prediction(ref), with --fasta."),
    ] = None,
    fasta: Annotated[
        Path | None, typer.Option("--fasta", help="Reference FASTA for --bed and --vcf.")
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(min=1, help="--vcf: window bp centred on the variant (default: the training length)."),
    ] = None,
    rc_average: Annotated[
        bool | None,
        typer.Option(
            "--rc-average/--no-rc-average",
            help="Average with the reverse complement (default: what the folder was trained with).",
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)] = 32,
    dtype: Annotated[
        Literal["float32", "bfloat16", "float16", "auto"], typer.Option(help="Weights' dtype.")
    ] = "float32",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    threads: CpuThreadsOption = None,
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="--vcf: continue a killed run from its checkpoint.")
    ] = False,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    as_json: JsonFlag = False,
) -> None:
    """Predict with a fine-tuned head: one row per input record (its status, the values on the
    raw label scale or class probabilities), or variant effects of a VCF."""
    from hexamer.finetune.apply import HeadFolderError, check_head_folder
    from hexamer.vep.settings import VepSettings

    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    job = _check_inputs(input_file, bed, vcf, fasta, resume)
    if ray is not None and job != "variants":
        raise typer.BadParameter("--ray scales out --vcf jobs", param_hint="'--ray'")
    _check_out(out, job)
    if window is not None:
        if job != "variants":
            raise typer.BadParameter("--window is for --vcf jobs", param_hint="'--window'")
        check_vep_settings(VepSettings(window=window))
    try:
        check_head_folder(model)  # a plain LM folder is a usage error before any weights load
    except HeadFolderError as exc:
        fail(exc)
    set_threads(threads)
    if job == "variants" and ray is not None:
        assert vcf is not None and fasta is not None
        from hexamer.cli.scaleout import ray_effects_runner

        runner = ray_effects_runner(ray.pool(threads=threads, dtype=dtype, device=device), ray.shard_records)
        options = {"window": window, "rc_average": rc_average, "batch_size": batch_size, "resume": resume}
        result = _run_effects(lambda note: runner(model, vcf, fasta, out, on_note=note, **options))
        summary = _variants_summary(out, result, model)
    elif job == "variants":
        assert vcf is not None and fasta is not None
        summary = _variants(model, vcf, fasta, out, window, rc_average, batch_size, dtype, device, resume)
    else:
        summary = _records(model, input_file, bed, fasta, out, rc_average, batch_size, dtype, device)
    if as_json:
        print_json(summary)
    else:
        console.print(f"wrote {out} ({describe_counts(summary['status_counts'])})")
    fail_if_none_ok(summary["status_counts"], "predicted", table=True)


def _load(model: str, rc_average: bool | None, batch_size: int, dtype: str, device: str | None):
    import torch

    from hexamer.finetune.apply import Predictor

    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return Predictor.load(model, dtype=dtype, device=where, rc_average=rc_average, batch_size=batch_size)
    except (FileNotFoundError, ValueError) as exc:
        fail(exc)


def _records(
    model: str,
    input_file: Path | None,
    bed: Path | None,
    fasta: Path | None,
    out: Path,
    rc_average: bool | None,
    batch_size: int,
    dtype: str,
    device: str | None,
) -> dict[str, Any]:
    from hexamer.finetune.apply import predict_records, predict_regions, write_predictions
    from hexamer.finetune.inputs import DataError
    from hexamer.io import SequenceInputError
    from hexamer.io.fasta import FastaError

    predictor = _load(model, rc_average, batch_size, dtype, device)
    try:
        if bed is not None:
            assert fasta is not None
            chunks = predict_regions(predictor, bed, fasta)
        else:
            assert input_file is not None
            chunks = predict_records(predictor, str(input_file))
        counts = write_predictions(out, predictor, chunks, regions=bed is not None)
    except (SequenceInputError, DataError, FastaError, OSError) as exc:
        fail(exc)
    return {
        "output": str(out),
        "n_records": sum(counts.values()),
        "status_counts": dict(sorted(counts.items())),
        "columns": list(predictor.columns),
        "rc_average": predictor.rc_average,
    }


def _run_effects(job: Callable[[Callable[[str], None]], VepRunResult]) -> VepRunResult:
    """``job(on_note)``, its notes on stderr; bad input or a refused resume ends the command."""
    from hexamer.vep import FastaError, VcfInputError
    from hexamer.vep.job import ResumeError

    def note(message: str) -> None:
        err_console.print(f"[yellow]{message}[/yellow]")

    try:
        return job(note)
    except (VcfInputError, FastaError, ResumeError, FileNotFoundError, ValueError) as exc:
        fail(exc)


def _variants_summary(out: Path, result: VepRunResult, head: str) -> dict[str, Any]:
    from hexamer.finetune.apply import output_columns, read_head_settings
    from hexamer.vep import status_summary

    err_console.print(f"{result.n_rows:,} rows: {status_summary(result.status_counts, result.reason_counts)}")
    return {
        "output": str(out),
        "n_rows": result.n_rows,
        "status_counts": dict(sorted(result.status_counts.items())),
        "reason_counts": {
            status: {reason: n for (s, reason), n in sorted(result.reason_counts.items()) if s == status}
            for status in sorted({s for s, _ in result.reason_counts})
        },
        "n_resumed": result.n_resumed,
        "columns": list(output_columns(read_head_settings(head).task)),
    }


def _variants(
    model: str,
    vcf: Path,
    fasta: Path,
    out: Path,
    window: int | None,
    rc_average: bool | None,
    batch_size: int,
    dtype: str,
    device: str | None,
    resume: bool,
) -> dict[str, Any]:
    from hexamer.finetune.effects import run_effects

    predictor = _load(model, rc_average, batch_size, dtype, device)
    result = _run_effects(
        lambda note: run_effects(predictor, vcf, fasta, out, window=window, resume=resume, on_note=note)
    )
    return {**_variants_summary(out, result, model), "rc_average": predictor.rc_average}
