"""``hexamer predict``: a fine-tuned head folder applied to sequences, BED regions or a VCF; a thin
layer over :mod:`hexamer.finetune.apply` and :mod:`hexamer.finetune.effects`."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
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
from hexamer.cli.checks import MAX_BATCH_SIZE, check_plot_path, check_runtime, check_vep_settings, is_stdio
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.ray_options import RayRun, ray_options
from hexamer.cli.sequence_jobs import count_records, fail_if_none_ok, progress_bar, set_threads

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
    if resume and is_stdio(vcf):
        raise typer.BadParameter("--resume needs a VCF file, not - (standard input)")
    for option, path in ((given[0], input_file or bed or vcf), ("--fasta", fasta)):
        if path is not None and str(path) == "-" and option not in ("--input", "--vcf"):
            raise typer.BadParameter(
                "standard input is for --input and --vcf; give a file", param_hint=f"'{option}'"
            )
        if path is not None and str(path) != "-" and not path.is_file():
            raise typer.BadParameter(f"{str(path)!r} is not a file", param_hint=f"'{option}'")
    return job


def _check_out(out: Path, job: str, resume: bool) -> None:
    from hexamer.io import table_format
    from hexamer.vep import output_kind

    if is_stdio(out):  # as hexamer vep: the annotated VCF on standard output
        if job != "variants":
            raise typer.BadParameter("-o - writes the VCF of a --vcf job; give a file", param_hint="'--out'")
        if resume:
            raise typer.BadParameter("--resume needs an output file, not - (standard output)")
        return
    try:
        output_kind(out) if job == "variants" else table_format(out)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--out'") from None
    if not out.parent.is_dir():
        raise typer.BadParameter(f"output folder {str(out.parent)!r} does not exist", param_hint="'--out'")


@dataclass(frozen=True)
class VariantOptions:
    """The options only a ``--vcf`` job takes (each None when not given)."""

    window: int | None = None
    info_fields: str | None = None
    rename_chrs: Path | None = None
    plot: Path | None = None

    def given(self) -> dict[str, object]:
        """The options given, by their flag."""
        flags = {
            "window": "--window",
            "info_fields": "--info-fields",
            "rename_chrs": "--rename-chrs",
            "plot": "--plot",
        }
        return {flags[k]: v for k, v in vars(self).items() if v is not None}


#: ``--window``, ``--info-fields``, ``--rename-chrs`` and ``--plot``, declared once and handed to
#: ``predict`` as one :class:`VariantOptions`.
variant_options = option_group(
    "variant",
    (
        (
            "window",
            Annotated[
                int | None,
                typer.Option(
                    min=1, help="--vcf: window bp centred on the variant (default: the training length)."
                ),
            ],
            None,
        ),
        (
            "info_fields",
            Annotated[
                str | None,
                typer.Option(
                    "--info-fields",
                    help="--vcf, table outputs: add these INFO fields of the input as info_NAME columns "
                    "(comma-separated, e.g. AF,CLNSIG, or 'all').",
                ),
            ],
            None,
        ),
        (
            "rename_chrs",
            Annotated[
                Path | None,
                typer.Option(
                    "--rename-chrs",
                    help="--vcf: contig renames, as in bcftools: two whitespace-separated columns, VCF name "
                    "then FASTA name.",
                ),
            ],
            None,
        ),
        (
            "plot",
            Annotated[
                Path | None,
                typer.Option(
                    "--plot",
                    help="--vcf: also draw the effect per variant kind (.png/.svg/.pdf; heads with one score: "
                    "a single-target regression or a binary head).",
                ),
            ],
            None,
        ),
    ),
    VariantOptions,
)


@app.command()
@ray_options(
    Annotated[
        int | None,
        typer.Option(min=1, help="--ray: records per shard, a multiple of 50,000 (default 50,000)."),
    ]
)
@variant_options
def predict(
    model: Annotated[str, typer.Option("--model", "-m", help="A fine-tuned head folder (hexamer finetune).")],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help=".parquet, .tsv, .csv or .jsonl; with --vcf also .vcf, .vcf.gz or .bcf, or - (VCF on stdout).",
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
        typer.Option(
            "--vcf", help="Variant effects: prediction(alt) - prediction(ref), with --fasta; - reads stdin."
        ),
    ] = None,
    fasta: Annotated[
        Path | None, typer.Option("--fasta", help="Reference FASTA for --bed and --vcf.")
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
    variant: VariantOptions = FILLED,  # the --vcf options (variant_options)
    ray: RayRun | None = None,  # the --ray options (ray_options)
    as_json: JsonFlag = False,
) -> None:
    """Predict with a fine-tuned head: one row per input record (its status, the values on the
    raw label scale or class probabilities), or variant effects of a VCF."""
    from hexamer.finetune.apply import HeadFolderError, check_head_folder

    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    job = _check_inputs(input_file, bed, vcf, fasta, resume)
    if ray is not None and job != "variants":
        raise typer.BadParameter("--ray scales out --vcf jobs", param_hint="'--ray'")
    _check_out(out, job, resume)
    for option in variant.given():
        if job != "variants":
            raise typer.BadParameter(f"{option} is for --vcf jobs", param_hint=f"'{option}'")
    try:
        check_head_folder(model)  # a plain LM folder is a usage error before any weights load
    except HeadFolderError as exc:
        fail(exc)
    options: dict[str, Any] = {}
    if job == "variants":
        options = _variant_options(model, variant, rc_average, batch_size, resume)
    set_threads(threads)
    if job == "variants":
        assert vcf is not None and fasta is not None
        summary = _variants(model, vcf, fasta, out, options, ray, threads, dtype, device)
        summary["plot"] = _plot(variant.plot, summary.pop("result"), model)
    else:
        summary = _records(model, input_file, bed, fasta, out, rc_average, batch_size, dtype, device)
    if as_json and is_stdio(out):  # standard output carries the VCF itself
        print(json.dumps(summary, default=str), file=sys.stderr)
    elif as_json:
        print_json(summary)
    else:
        shown = "standard output" if is_stdio(out) else str(out)
        (err_console if is_stdio(out) else console).print(
            f"wrote {shown} ({describe_counts(summary['status_counts'])})"
        )
    fail_if_none_ok(summary["status_counts"], "predicted", table=True)


def _variants(
    model: str,
    vcf: Path,
    fasta: Path,
    out: Path,
    options: dict[str, Any],
    ray: RayRun | None,
    threads: int | None,
    dtype: str,
    device: str | None,
) -> dict[str, Any]:
    """The variant job, in this process or on Ray actors: its summary, and ``result``. ``-`` as
    the VCF or the output goes through a file in a temporary folder, as ``hexamer vep`` does."""
    from hexamer.io.stdio import copy_to_stdout, spool_stdin

    with tempfile.TemporaryDirectory(prefix="hexamer-predict-") as tmp:
        target = Path(tmp) / "stdout.vcf" if is_stdio(out) else out
        if is_stdio(vcf):
            vcf = Path(tmp) / "stdin.vcf"
            spool_stdin(vcf)
        if ray is not None:
            from hexamer.cli.scaleout import ray_effects_runner

            runner = ray_effects_runner(
                ray.pool(threads=threads, dtype=dtype, device=device), ray.shard_records
            )
            result = _run_effects(
                vcf,
                lambda tick, note: runner(
                    model, vcf, fasta, target, on_progress=tick, on_note=note, **options
                ),
            )
            extra: dict[str, Any] = {}
        else:
            from hexamer.finetune.effects import run_effects

            predictor = _load(model, options["rc_average"], options["batch_size"], dtype, device)
            local = {k: v for k, v in options.items() if k not in ("rc_average", "batch_size")}
            result = _run_effects(
                vcf,
                lambda tick, note: run_effects(
                    predictor, vcf, fasta, target, on_progress=tick, on_note=note, **local
                ),
            )
            extra = {"rc_average": predictor.rc_average}
        if is_stdio(out):
            copy_to_stdout(target)
    summary = _variants_summary(out, result, model)
    if is_stdio(out):
        summary["output"] = "standard output"
    return {**summary, **extra, "result": result}


def _variant_options(
    model: str, variant: VariantOptions, rc_average: bool | None, batch_size: int, resume: bool
) -> dict[str, Any]:
    """The options of a variant job, each checked before the model loads."""
    window, info_fields, rename_chrs, plot = (
        variant.window,
        variant.info_fields,
        variant.rename_chrs,
        variant.plot,
    )
    from hexamer.finetune.apply import read_head_settings
    from hexamer.finetune.effects import score_output
    from hexamer.io.contigs import RenameFileError, read_rename_file
    from hexamer.vep import VepSettings

    if window is not None:
        check_vep_settings(VepSettings(window=window))
    check_plot_path(plot)
    if plot is not None and score_output(task := read_head_settings(model).task) is None:
        raise typer.BadParameter(
            f"this head has {task.num_labels} outputs and no single score to plot; plot a column of the "
            "output with: hexamer plot hist TABLE --score-col COLUMN --by kind",
            param_hint="'--plot'",
        )
    renames = None
    if rename_chrs is not None:
        try:
            renames = read_rename_file(rename_chrs)
        except (RenameFileError, OSError) as exc:
            raise typer.BadParameter(str(exc), param_hint="'--rename-chrs'") from None
    return {
        "window": window,
        "rc_average": rc_average,
        "batch_size": batch_size,
        "resume": resume,
        "info_fields": info_fields,
        "renames": renames,
    }


def _plot(plot: Path | None, result: VepRunResult, model: str) -> str | None:
    """Draw ``--plot`` (the effect per variant kind); its path, or None when nothing was drawn."""
    if plot is None:
        return None
    if not result.scores:
        err_console.print("[yellow]no variant was scored: no plot drawn[/yellow]")
        return None
    from hexamer.finetune.apply import read_head_settings
    from hexamer.finetune.effects import plot_effects

    counts = plot_effects(plot, result, read_head_settings(model).task)
    err_console.print(f"wrote {plot} (scored variants per kind: {describe_counts(counts)})")
    return str(plot)


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
    total = _count_regions(bed) if bed is not None else count_records(None, input_file)
    try:
        with progress_bar() as progress:
            task = progress.add_task("predicting", total=total, rate="")
            tick = _ticker(progress, task, "records/s")
            if bed is not None:
                assert fasta is not None
                chunks = predict_regions(predictor, bed, fasta)
            else:
                assert input_file is not None
                chunks = predict_records(predictor, str(input_file))
            counts = write_predictions(
                out, predictor, chunks, regions=bed is not None, on_rows=lambda rows: tick(len(rows))
            )
    except (SequenceInputError, DataError, FastaError, OSError) as exc:
        fail(exc)
    return {
        "output": str(out),
        "n_records": sum(counts.values()),
        "status_counts": dict(sorted(counts.items())),
        "columns": list(predictor.columns),
        "rc_average": predictor.rc_average,
    }


def _ticker(progress: Any, task: Any, unit: str) -> Callable[[int], None]:
    """``advance(n)`` of a progress bar's task, with the rate in ``unit``."""

    def tick(n: int) -> None:
        elapsed = progress.tasks[task].elapsed or 1e-9
        done = progress.tasks[task].completed + n
        progress.update(task, advance=n, rate=f"{done / elapsed:,.1f} {unit}")

    return tick


def _count_regions(bed: Path) -> int | None:
    """The regions of a BED file (the bar's total), or None when it cannot be read."""
    try:
        with open(bed, encoding="utf-8", errors="replace") as f:
            return sum(1 for line in f if line.strip() and not line.startswith(("#", "track", "browser")))
    except OSError:
        return None


def _run_effects(
    vcf: Path, job: Callable[[Callable[[int], None], Callable[[str], None]], VepRunResult]
) -> VepRunResult:
    """``job(on_progress, on_note)`` under a progress bar (total: the VCF's rows, as ``hexamer
    vep`` counts them), its notes on stderr; bad input or a refused resume ends the command."""
    from hexamer.finetune.effects import count_variant_rows
    from hexamer.vep import FastaError, ResumeError, VcfInputError

    def note(message: str) -> None:
        err_console.print(f"[yellow]{message}[/yellow]")

    try:
        with progress_bar() as progress:
            task = progress.add_task("predicting variant effects", total=count_variant_rows(vcf), rate="")
            return job(_ticker(progress, task, "variants/s"), note)
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
