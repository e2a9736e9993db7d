"""``hexamer vep`` and ``hexamer embed``: thin layers over :mod:`hexamer.vep` and\n:mod:`hexamer.embedding_job` (``hexamer plot``: :mod:`hexamer.cli.plot_cmd`)."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from hexamer.cli import server_options as served
from hexamer.cli.app import (
    CpuThreadsOption,
    DTypeOption,
    JsonFlag,
    app,
    console,
    describe_counts,
    err_console,
    fail,
    print_json,
    resolve_model,
)
from hexamer.cli.checks import (
    MAX_BATCH_SIZE,
    MAX_TOKEN_BUDGET,
    PrefixOption,
    check_choice,
    check_output,
    check_plot_path,
    check_runtime,
    check_vep_settings,
    fasta_option,
    is_stdio,
    path_option,
)
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.ray_options import RayRun, check_resume, ray_options
from hexamer.cli.scaleout import ResumeOption
from hexamer.cli.sequence_jobs import (
    count_records,
    job_progress,
    load_calibration,
    progress_bar,
    set_threads,
)
from hexamer.io.stdio import copy_to_stdout

if TYPE_CHECKING:
    from hexamer.embedding_job import EmbeddingSettings
    from hexamer.vep import VepSettings


def _vep_settings(**options: Any) -> VepSettings:
    from hexamer.vep import VepSettings

    return check_vep_settings(VepSettings(**options))  # before the model loads


#: The options of ``vep`` that make its :class:`~hexamer.vep.VepSettings`, handed to the command
#: as one ``settings``: every number that decides the scores, in one place.
vep_settings_options = option_group(
    "settings",
    (
        (
            "recipe",
            Annotated[
                Literal["window", "next_base"],
                typer.Option(help="window: LL(alt) - LL(ref); next_base: log P(ref) - log P(alt)."),
            ],
            "window",
        ),
        (
            "window",
            Annotated[int, typer.Option(help="Window recipe: bp centred on the variant (at least 30).")],
            8192,
        ),
        (
            "window_grid",
            Annotated[
                int,
                typer.Option(
                    help="Window recipe: centre windows on tiles of this many bp so the variants of a tile "
                    "share one reference forward (1 = centred on each variant, the published recipe; at "
                    "most half the window).",
                ),
            ],
            1,
        ),
        (
            "rc_average",
            Annotated[
                bool,
                typer.Option("--rc-average/--no-rc-average", help="Average with the reverse complement."),
            ],
            False,
        ),
        (
            "context",
            Annotated[int, typer.Option(help="Next-base recipe: left context in bp (at least 12).")],
            24576,
        ),
        (
            "context_grid",
            Annotated[int, typer.Option(help="Next-base: contexts start on this grid (6 = fixed length).")],
            6144,
        ),
        ("batch_size", Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)], 8),
        (
            "token_budget",
            Annotated[
                int | None,
                typer.Option(
                    min=1,
                    max=MAX_TOKEN_BUDGET,
                    help="Most padded tokens per forward (default: 4096 on CPU, 16384 on GPU). Part of a "
                    "job's settings: --resume needs the value the run started with.",
                ),
            ],
            None,
        ),
    ),
    _vep_settings,
)


VcfOption = Annotated[
    Path, typer.Option("--vcf", help="Variants: VCF/BCF, plain, gzip or bgzip; - reads standard input.")
]
VepOutOption = Annotated[
    Path,
    typer.Option(
        "--out", "-o", help=".vcf, .vcf.gz, .bcf, .parquet, .tsv, .csv or .jsonl; - writes VCF to stdout."
    ),
]
InfoFieldsOption = Annotated[
    str | None,
    typer.Option(
        "--info-fields",
        help="Table outputs: add these INFO fields of the input as info_NAME columns "
        "(comma-separated, e.g. AF,CLNSIG, or 'all').",
    ),
]
VepPlotOption = Annotated[
    Path | None,
    path_option(
        "Also draw the score distribution per variant kind (.png/.svg/.pdf).",
        "an image is written to a file (standard output carries the VCF or the summary)",
        "--plot",
    ),
]
CalibrationOption = Annotated[
    Path | None,
    typer.Option(
        "--calibration",
        help="A `hexamer calibrate` file of this model and settings: adds HEXAMER_RAW and HEXAMER_PHRED.",
    ),
]
RenameChrsOption = Annotated[
    Path | None,
    typer.Option(
        "--rename-chrs",
        help="Contig renames, as in bcftools: two whitespace-separated columns, VCF name then FASTA name.",
    ),
]


@app.command()
@served.server_options
@vep_settings_options
@ray_options(
    Annotated[
        int | None,
        typer.Option(min=1, help="--ray: records per shard, a multiple of 50,000 (default 50,000)."),
    ]
)
def vep(
    command: typer.Context,
    vcf: VcfOption,
    fasta: Annotated[Path, fasta_option()],
    out: VepOutOption,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    settings: VepSettings = FILLED,  # the recipe options (vep_settings_options)
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="Continue a killed run from its checkpoint.")
    ] = False,
    info_fields: InfoFieldsOption = None,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    threads: CpuThreadsOption = None,
    plot: VepPlotOption = None,
    server: served.Server | None = None,  # the --server options (server_options)
    calibration: CalibrationOption = None,
    rename_chrs: RenameChrsOption = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    as_json: JsonFlag = False,
) -> None:
    """Score every variant of a VCF (every record appears in the output, with a status).

    Exits with status 1 (after writing the whole output) when most records name a contig the FASTA
    does not have."""
    from hexamer.io.vcf.contig_survey import survey_contigs
    from hexamer.io.vcf.index import indexed_records
    from hexamer.vep import FastaError, VcfInputError
    from hexamer.vep.job import ResumeError, run_vep

    served.check_server_choice(server, model, ray, command)  # before any file is looked at
    # under --ray the device and threads are the workers', checked on their machines
    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    _check_vep_files(settings, vcf, out, resume)
    set_threads(threads)
    cal = load_calibration(calibration)
    check_plot_path(plot)
    runner = run_vep
    if ray is not None:
        from hexamer.cli.scaleout import ray_vep_runner

        runner = ray_vep_runner(ray.pool(threads=threads, dtype=dtype, device=device), ray.shard_records)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hexamer-vep-")))
        target = tmp / "stdout.vcf" if is_stdio(out) else out
        vcf, reference, survey = _survey(stack, tmp, vcf, fasta, rename_chrs)
        known = {r.message for r in survey.resolutions.values()}  # said in the survey: not again per contig
        carbon = (
            resolve_model(model)  # --ray: each actor loads it
            if ray is not None
            else served.open_model(server, model, dtype, device, settings.batch_size, command)
        )
        try:
            # the bar's total: the records the index counts (none: a bar without a total)
            with job_progress("scoring variants", indexed_records(vcf), digits=1) as bar:
                result = runner(
                    carbon,
                    vcf,
                    fasta,
                    target,
                    resume=resume,
                    info_fields=info_fields,
                    calibration=cal,
                    on_progress=functools.partial(bar.tick, unit="variants"),
                    on_note=lambda msg: (
                        None if msg in known else err_console.print(f"[yellow]{msg}[/yellow]")
                    ),
                    renames=reference.resolver.renames,
                    settings=settings,
                )
        except (VcfInputError, FastaError, ResumeError, FileNotFoundError, ValueError) as exc:
            fail(exc)
        if is_stdio(out):
            copy_to_stdout(target)
    survey = survey_contigs(vcf, reference, result.contig_records)  # the records the job read
    _report_vep(result, settings, survey, out, plot, as_json)


def _check_vep_files(settings: VepSettings, vcf: Path, out: Path, resume: bool) -> None:
    """The recipe, the output and the VCF (``-``: standard input, which ``--resume`` cannot take)."""
    from hexamer.vep.output import output_kind
    from hexamer.vep.recipes import RECIPES

    check_choice("--recipe", settings.recipe, RECIPES)
    if is_stdio(out) and resume:
        raise typer.BadParameter("--resume needs an output file, not - (standard output)")
    if is_stdio(vcf) and resume:
        raise typer.BadParameter("--resume needs a VCF file, not - (standard input)")
    if not is_stdio(out):
        check_output("--out", out, output_kind)
    if not is_stdio(vcf) and not vcf.is_file():
        raise typer.BadParameter(f"{str(vcf)!r} is not a file", param_hint="'--vcf'")


def _survey(
    stack: contextlib.ExitStack, tmp: Path, vcf: Path, fasta: Path, rename_chrs: Path | None
) -> tuple[Path, Any, Any]:
    """The VCF (standard input spooled under ``tmp``), the reference (open in ``stack``) and the
    survey of the VCF's contigs against it, its notes printed."""
    from hexamer.io.reference import Reference
    from hexamer.io.stdio import spool_stdin
    from hexamer.io.vcf.contig_survey import survey_contigs
    from hexamer.vep import FastaError, VcfInputError

    try:
        if is_stdio(vcf):
            vcf = tmp / "stdin.vcf"
            spool_stdin(vcf)
        reference = stack.enter_context(Reference(fasta, renames=rename_chrs))
        survey = survey_contigs(vcf, reference)
    except (VcfInputError, FastaError, ValueError) as exc:
        fail(exc)
    for line in ([reference.note] if reference.note else []) + survey.notes():
        err_console.print(f"[yellow]{line}[/yellow]")
    if survey.mostly_unmatched():
        err_console.print(
            f"[yellow]{survey.n_unmatched} of {survey.n_records} records name a contig the FASTA "
            "does not have: they will be skipped[/yellow]"
        )
    return vcf, reference, survey


def _report_vep(
    result: Any, settings: VepSettings, survey: Any, out: Path, plot: Path | None, as_json: bool
) -> None:
    """The summary (``--json``: one object; on standard error when the VCF went to standard
    output), the plot, and exit status 1 when most contigs were unknown or nothing was scored."""
    from collections import Counter

    from hexamer.vep import status_summary

    out_info = err_console if is_stdio(out) else console  # stdout may be the output itself
    statuses = dict(sorted(result.status_counts.items()))
    kinds = dict(sorted(Counter(result.kinds).items()))
    shown = "standard output" if is_stdio(out) else str(result.output)
    in_words = status_summary(result.status_counts, result.reason_counts)
    summary = {
        "output": shown,
        "n_rows": result.n_rows,
        "status_counts": statuses,
        "reason_counts": {  # {status: {reason category: rows}}
            status: {reason: n for (s, reason), n in sorted(result.reason_counts.items()) if s == status}
            for status in sorted({s for s, _ in result.reason_counts})
        },
        "scored_kinds": kinds,
        "n_resumed": result.n_resumed,
        "plot": None,
    }
    if not as_json:
        out_info.print(f"wrote {shown} ({result.n_rows:,} rows: {in_words})")
    if plot is not None and not result.scores:
        err_console.print("[yellow]no variant was scored: no plot drawn[/yellow]")
    elif plot is not None:
        from hexamer import plots

        plots.plot_score_hist(
            plot,
            result.scores,
            result.kinds,
            title=f"{settings.recipe} recipe: scores per variant kind",
            xlabel=plots.score_axis_label(settings.recipe),
        )
        summary["plot"] = str(plot)
        if not as_json:
            out_info.print(f"wrote {plot} (scored variants per kind: {describe_counts(kinds)})")
    if as_json:
        if is_stdio(out):  # stdout carries the VCF itself
            print(json.dumps(summary, default=str), file=sys.stderr)
        else:
            print_json(summary)
    if survey.mostly_unmatched():
        fail(survey.summary(), code=1)
    if bool(statuses.get("failed", 0)) and not statuses.get("ok", 0):
        fail(f"no variant was scored ({in_words}); the reasons are in the output", code=1)


def _embedding_settings(**options: Any) -> EmbeddingSettings:
    from hexamer.embedding_job import EmbeddingSettings

    return EmbeddingSettings(**options)


#: The options that decide the vectors, handed to ``embed`` as one
#: :class:`~hexamer.embedding_job.EmbeddingSettings` (the local and the ``--ray`` job take it whole).
embedding_options = option_group(
    "settings",
    (
        (
            "pool",
            Annotated[
                Literal["mean", "last", "sep"],
                typer.Option(help="mean (content tokens), last (content token) or sep (</dna>)."),
            ],
            "mean",
        ),
        (
            "layer",
            Annotated[
                int, typer.Option(help="Hidden layer; negative counts from the end (-1 = final norm).")
            ],
            -1,
        ),
        (
            "max_tokens",
            Annotated[int | None, typer.Option(min=1, help="Chunk length in tokens (default: the context).")],
            None,
        ),
        (
            "chunk_overlap",
            Annotated[int | None, typer.Option(min=0, help="Overlap between chunks, bp.")],
            None,
        ),
        ("prefix", PrefixOption, ""),
        ("batch_size", Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)], 8),
    ),
    _embedding_settings,
)


@app.command()
@served.server_options
@embedding_options
@ray_options(
    Annotated[
        int | None,
        typer.Option(min=1, max=10_000_000, help="--ray: least records per shard (default 1,024)."),
    ]
)
def embed(
    command: typer.Context,
    input_file: Annotated[
        Path, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet; - reads FASTA from stdin.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help=".parquet, or .npy (+ .ids.txt); - writes Parquet to stdout.")
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    settings: EmbeddingSettings = FILLED,  # the embedding options (embedding_options)
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ...")] = None,
    threads: CpuThreadsOption = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: served.Server | None = None,  # the --server options (server_options): hexamer serve only
    as_json: JsonFlag = False,
) -> None:
    """Embed sequences (one vector per record; failures reported and kept as empty rows)."""
    from hexamer.backend import UnsupportedOperation
    from hexamer.embedding_job import run_embedding
    from hexamer.io import SequenceInputError
    from hexamer.remote import RemoteError

    check_choice("--pool", settings.pool, ("mean", "last", "sep"))
    served.check_server_choice(server, model, ray, command)
    # under --ray the device and threads are the workers', checked on their machines
    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    _check_embed_output(out, as_json, ray)
    check_resume(resume, ray)
    if ray is not None:
        from hexamer.cli.scaleout import embed_on_ray

        return embed_on_ray(
            ray.pool(threads=threads, dtype=dtype, device=device),
            input_file=input_file,
            out=out,
            model=resolve_model(model),
            shard_records=ray.shard_records,
            as_json=as_json,
            resume=resume,
            **settings.driver_options(),
        )
    set_threads(threads)
    carbon = served.open_model(server, model, dtype, device, settings.batch_size, command)
    try:
        with progress_bar() as progress, tempfile.TemporaryDirectory(prefix="hexamer-embed-") as tmp:
            task = progress.add_task("embedding", total=count_records(None, input_file), rate="")
            target = Path(tmp) / "embeddings.parquet" if is_stdio(out) else out  # "-o -": Parquet on stdout
            result = run_embedding(
                carbon,
                input_file,
                target,
                settings,
                on_progress=lambda n: progress.update(task, advance=n),
                on_bad_record=lambda rec: err_console.print(f"[yellow]skipped[/yellow] {rec}"),
                on_failed=lambda ident, why: err_console.print(f"[yellow]failed[/yellow] {ident}: {why}"),
            )
            if is_stdio(out):
                copy_to_stdout(target)
    # UnsupportedOperation: a vLLM or SGLang server, whose pooling is not hexamer's; RemoteError: a
    # server that stopped answering (the output, written atomically, is not left half-done)
    except (SequenceInputError, ValueError, UnsupportedOperation, RemoteError) as exc:
        fail(exc)
    n, bad = result.n_records, len(result.errors)
    if as_json:
        print_json({"output": str(out), "n_records": n, "n_without_vector": bad})
    else:
        (err_console if is_stdio(out) else console).print(
            f"wrote {out} ({n:,} records, {bad:,} without a vector)"
        )
    if n and bad >= n:  # written, every row with its reason: but nothing was embedded
        fail(f"no record was embedded; the reasons are in {out} and above", code=1)


def _check_embed_output(out: Path, as_json: bool, ray: RayRun | None) -> None:
    """``--out``: a file of a supported format, or ``-`` (Parquet on standard output) without
    ``--json`` or ``--ray``."""
    if is_stdio(out) and as_json:
        raise typer.BadParameter(
            "--out - writes the Parquet table to standard output; drop --json (or give a file)"
        )
    if is_stdio(out) and ray is not None:
        raise typer.BadParameter(
            "--ray writes the embeddings to a file (its shards are kept for --resume); give --out FILE",
            param_hint="'--out'",
        )
    if not is_stdio(out):
        check_output("--out", out, _check_embedding_output)


def _check_embedding_output(path: Path) -> None:
    from hexamer.embed.writers import EMBEDDING_FORMATS

    if not path.name.lower().endswith(tuple(EMBEDDING_FORMATS)):
        raise ValueError(f"embeddings are written as {' or '.join(EMBEDDING_FORMATS)}, got {path.name!r}")
