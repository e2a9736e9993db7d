"""``hexamer vep``, ``hexamer embed`` and ``hexamer plot``: thin wrappers of hexamer.vep/embed/plots."""

from __future__ import annotations

import contextlib
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
from hexamer.cli.sequence_jobs import count_records, load_calibration, load_carbon, progress_bar, set_threads
from hexamer.io.stdio import copy_to_stdout

if TYPE_CHECKING:
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
    vcf: Annotated[
        Path, typer.Option("--vcf", help="Variants: VCF/BCF, plain, gzip or bgzip; - reads standard input.")
    ],
    fasta: Annotated[Path, fasta_option()],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help=".vcf, .vcf.gz, .bcf, .parquet, .tsv, .csv or .jsonl; - writes VCF to stdout."
        ),
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    settings: VepSettings = FILLED,  # the recipe options (vep_settings_options)
    resume: Annotated[
        bool, typer.Option("--resume/--no-resume", help="Continue a killed run from its checkpoint.")
    ] = False,
    info_fields: Annotated[
        str | None,
        typer.Option(
            "--info-fields",
            help="Table outputs: add these INFO fields of the input as info_NAME columns "
            "(comma-separated, e.g. AF,CLNSIG, or 'all').",
        ),
    ] = None,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    threads: CpuThreadsOption = None,
    plot: Annotated[
        Path | None,
        path_option(
            "Also draw the score distribution per variant kind (.png/.svg/.pdf).",
            "an image is written to a file (standard output carries the VCF or the summary)",
            "--plot",
        ),
    ] = None,
    server: served.Server | None = None,  # the --server options (server_options)
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="A `hexamer calibrate` file of this model and settings: adds HEXAMER_RAW and HEXAMER_PHRED.",
        ),
    ] = None,
    rename_chrs: Annotated[
        Path | None,
        typer.Option(
            "--rename-chrs",
            help="Contig renames, as in bcftools: two whitespace-separated columns, VCF name then FASTA name.",
        ),
    ] = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    as_json: JsonFlag = False,
) -> None:
    """Score every variant of a VCF (every record appears in the output, with a status).

    Exits with status 1 (after writing the whole output) when most records name a contig the FASTA
    does not have."""
    from hexamer.io.reference import Reference
    from hexamer.io.stdio import spool_stdin
    from hexamer.io.vcf.contig_survey import survey_contigs
    from hexamer.io.vcf.index import indexed_records
    from hexamer.vep import FastaError, VcfInputError, status_summary
    from hexamer.vep.job import ResumeError, run_vep
    from hexamer.vep.output import output_kind
    from hexamer.vep.recipes import RECIPES

    served.check_server_choice(server, model, ray, command)  # before any file is looked at
    # under --ray the device and threads are the workers', checked on their machines
    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    check_choice("--recipe", settings.recipe, RECIPES)
    if is_stdio(out) and resume:
        raise typer.BadParameter("--resume needs an output file, not - (standard output)")
    if is_stdio(vcf) and resume:
        raise typer.BadParameter("--resume needs a VCF file, not - (standard input)")
    if not is_stdio(out):
        check_output("--out", out, output_kind)
    if not is_stdio(vcf) and not vcf.is_file():
        raise typer.BadParameter(f"{str(vcf)!r} is not a file", param_hint="'--vcf'")
    set_threads(threads)
    cal = load_calibration(calibration)
    check_plot_path(plot)
    runner = run_vep
    if ray is not None:
        from hexamer.cli.scaleout import ray_vep_runner

        runner = ray_vep_runner(ray.pool(threads=threads, dtype=dtype, device=device), ray.shard_records)
    out_info = err_console if is_stdio(out) else console  # stdout may be the output itself
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="hexamer-vep-")))
        target = tmp / "stdout.vcf" if is_stdio(out) else out
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
        known = {r.message for r in survey.resolutions.values()}  # said above: not again per contig
        carbon = (
            resolve_model(model)  # --ray: each actor loads it
            if ray is not None
            else served.open_model(server, model, dtype, device, settings.batch_size, command)
        )
        total = indexed_records(vcf)  # records, from the index (none: a bar without total)
        try:
            with progress_bar() as progress:
                task = progress.add_task("scoring variants", total=total, rate="")

                def tick(n: int) -> None:
                    elapsed = progress.tasks[task].elapsed or 1e-9
                    done = progress.tasks[task].completed + n
                    progress.update(task, advance=n, rate=f"{done / elapsed:,.1f} variants/s")

                def note(msg: str) -> None:
                    if msg not in known:
                        err_console.print(f"[yellow]{msg}[/yellow]")

                result = runner(
                    carbon,
                    vcf,
                    fasta,
                    target,
                    resume=resume,
                    info_fields=info_fields,
                    calibration=cal,
                    on_progress=tick,
                    on_note=note,
                    renames=reference.resolver.renames,
                    settings=settings,
                )
        except (VcfInputError, FastaError, ResumeError, FileNotFoundError, ValueError) as exc:
            fail(exc)
        if is_stdio(out):
            copy_to_stdout(target)
    from collections import Counter

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
    nothing_scored = bool(statuses.get("failed", 0)) and not statuses.get("ok", 0)
    if plot is not None:
        if not result.scores:
            err_console.print("[yellow]no variant was scored: no plot drawn[/yellow]")
        else:
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
    survey = survey_contigs(vcf, reference, result.contig_records)  # the records the job read
    if survey.mostly_unmatched():
        fail(survey.summary(), code=1)
    if nothing_scored:
        fail(f"no variant was scored ({in_words}); the reasons are in the output", code=1)


@app.command()
@ray_options(
    Annotated[
        int | None,
        typer.Option(min=1, max=10_000_000, help="--ray: least records per shard (default 1,024)."),
    ]
)
def embed(
    input_file: Annotated[
        Path, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet; - reads FASTA from stdin.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help=".parquet, or .npy (+ .ids.txt); - writes Parquet to stdout.")
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    pool: Annotated[
        Literal["mean", "last", "sep"],
        typer.Option(help="mean (content tokens), last (content token) or sep (</dna>)."),
    ] = "mean",
    layer: Annotated[
        int, typer.Option(help="Hidden layer; negative counts from the end (-1 = final norm).")
    ] = -1,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="Chunk length in tokens (default: the context).")
    ] = None,
    chunk_overlap: Annotated[int | None, typer.Option(min=0, help="Overlap between chunks, bp.")] = None,
    prefix: PrefixOption = "",
    batch_size: Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)] = 8,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ...")] = None,
    threads: CpuThreadsOption = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: Annotated[
        str | None, typer.Option(help="Not available: embeddings need the model's hidden states.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Embed sequences (one vector per record; failures reported and kept as empty rows)."""
    from hexamer.embed import embed_sequences, write_embeddings
    from hexamer.io import BadRecord, SequenceInputError, SequenceRecord, read_sequences

    served.refuse_server(
        server,
        "embeddings are the model's hidden states, which a vLLM / SGLang / hexamer server does not "
        "return (only log-probabilities); embed with a local --model",
    )

    check_choice("--pool", pool, ("mean", "last", "sep"))
    # under --ray the device and threads are the workers', checked on their machines
    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
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
            pooling=pool,
            layer=layer,
            max_tokens=max_tokens,
            chunk_overlap=chunk_overlap,
            prefix=prefix,
            batch_size=batch_size,
        )
    set_threads(threads)
    carbon = load_carbon(model, dtype, device, batch_size)
    errors: dict[str, str] = {}

    def records():  # a bad input record stays in the output, with no vector and its reason
        for rec in read_sequences(str(input_file)):
            if isinstance(rec, BadRecord):
                ident = rec.id or f"record{rec.index}"
                errors[ident] = rec.reason
                err_console.print(f"[yellow]skipped[/yellow] {rec}")
                yield SequenceRecord(id=ident, sequence="", index=rec.index)
            else:
                yield rec

    def on_error(ident: str, reason: str) -> None:
        if ident not in errors:
            errors[ident] = reason
            err_console.print(f"[yellow]failed[/yellow] {ident}: {reason}")

    try:
        with progress_bar() as progress:
            task = progress.add_task("embedding", total=count_records(None, input_file), rate="")
            items = embed_sequences(
                carbon,
                records(),
                pool=pool,  # type: ignore[arg-type]
                layer=layer,
                max_tokens=max_tokens,
                chunk_overlap=chunk_overlap,
                prefix=prefix,
                batch_size=batch_size,
                on_error=on_error,
            )
            with tempfile.TemporaryDirectory(prefix="hexamer-embed-") as tmp:
                target = (
                    Path(tmp) / "embeddings.parquet" if is_stdio(out) else out
                )  # "-o -": Parquet on stdout
                n = write_embeddings(
                    target, items, errors=errors, on_item=lambda _: progress.update(task, advance=1)
                )
                if is_stdio(out):
                    copy_to_stdout(target)
    except (SequenceInputError, ValueError) as exc:
        fail(exc)
    if as_json:
        print_json({"output": str(out), "n_records": n, "n_without_vector": len(errors)})
    else:
        (err_console if is_stdio(out) else console).print(
            f"wrote {out} ({n:,} records, {len(errors):,} without a vector)"
        )
    if n and len(errors) >= n:  # written, every row with its reason: but nothing was embedded
        fail(f"no record was embedded; the reasons are in {out} and above", code=1)


def _check_embedding_output(path: Path) -> None:
    from hexamer.embed.writers import EMBEDDING_FORMATS

    if not path.name.lower().endswith(tuple(EMBEDDING_FORMATS)):
        raise ValueError(f"embeddings are written as {' or '.join(EMBEDDING_FORMATS)}, got {path.name!r}")


@app.command()
def plot(
    kind: Annotated[
        Literal["hist", "roc", "pr"], typer.Argument(help="hist (distribution), roc or pr (against labels).")
    ],
    table: Annotated[
        Path,
        typer.Argument(
            help="A score table (.parquet/.tsv/.csv/.jsonl) from hexamer vep or score; - reads standard "
            "input (with --format)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help=".png, .svg or .pdf; - writes PNG to stdout.")],
    table_format: Annotated[
        Literal["parquet", "tsv", "csv", "jsonl"] | None,
        typer.Option(
            "--format",
            help="The table's format: needed when it is read from standard input, else its extension.",
        ),
    ] = None,
    score_col: Annotated[str, typer.Option(help="Column holding the scores.")] = "score",
    label_col: Annotated[
        str | None, typer.Option(help="Label column (roc, pr): 0/1, or any values with --positive.")
    ] = None,
    positive: Annotated[
        str | None,
        typer.Option(help="roc, pr: the label value of the positive class, e.g. pathogenic."),
    ] = None,
    by: Annotated[str | None, typer.Option(help="hist: one histogram per value of this column.")] = None,
    negate: Annotated[
        bool,
        typer.Option(
            "--negate/--no-negate", help="Use -score (window scores are negative for damaging alts)."
        ),
    ] = False,
    title: Annotated[str | None, typer.Option(help="Figure title (default: says what is drawn).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score distribution, or ROC / PR curves against labels."""
    import numpy as np

    from hexamer import plots
    from hexamer.io import table_format as format_of
    from hexamer.io.tables import read_table

    if is_stdio(table) and table_format is None:
        raise typer.BadParameter(
            "a table read from standard input ('-') needs --format (parquet, tsv, csv or jsonl)"
        )
    if is_stdio(out) and as_json:
        raise typer.BadParameter("--out - writes the image to standard output; drop --json (or give a file)")
    shown = "standard input" if is_stdio(table) else str(table)
    try:  # the format first: a name it cannot tell is a usage error, a bad file is not
        format_of("" if is_stdio(table) else table, table_format)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'TABLE'") from None
    try:
        data = read_table(table, table_format)
    except Exception as exc:
        fail(f"cannot read {shown}: {exc}")
    missing = [c for c in (score_col, label_col, by) if c and c not in data.column_names]
    if missing:
        fail(f"{shown} has no column {missing[0]!r}; columns: {', '.join(data.column_names)}")
    scores = np.asarray(data.column(score_col).to_pylist(), dtype=float)
    keep = ~np.isnan(scores)
    scores = -scores if negate else scores
    recipes = set(data.column("recipe").to_pylist()) if "recipe" in data.column_names else set()
    meaning = recipes.pop() if len(recipes) == 1 else score_col
    xlabel = plots.score_axis_label(meaning, negated=negate)
    summary: dict = {"output": str(out), "kind": kind, "n": int(keep.sum())}
    spool = tempfile.TemporaryDirectory(prefix="hexamer-plot-") if is_stdio(out) else None
    target = Path(spool.name) / "plot.png" if spool is not None else out  # "-o -": PNG on stdout
    screen = err_console if spool is not None else console
    if kind == "hist":
        groups = data.column(by).to_pylist() if by else None
        counts = plots.plot_score_hist(
            target,
            scores[keep],
            [g for g, k in zip(groups, keep, strict=True) if k] if groups else None,
            title=title or (f"{score_col} per {by}" if by else f"{score_col} distribution"),
            xlabel=xlabel,
        )
        summary["counts"] = counts
        if spool is not None:
            copy_to_stdout(target)
            spool.cleanup()
        if as_json:
            print_json(summary)
        else:
            screen.print(f"wrote {out} (plotted scores per group: {describe_counts(counts)})")
        return
    if label_col is None:
        raise typer.BadParameter(f"{kind} needs --label-col")
    labels = data.column(label_col).to_pylist()
    labels = [label for label, k in zip(labels, keep, strict=True) if k]
    fn, metric = (plots.plot_roc, "AUROC") if kind == "roc" else (plots.plot_pr, "average precision")
    what = "ROC" if kind == "roc" else "Precision-recall"
    positive_name = positive if positive is not None else "1"
    try:
        values = fn(
            target,
            {score_col if not negate else f"-{score_col}": scores[keep]},
            labels,
            title=title or f"{what}: {'-' if negate else ''}{score_col} vs {label_col} = {positive_name}",
            positive=positive,
        )
    except ValueError as exc:
        fail(f"{shown}: {exc}")
    if spool is not None:
        copy_to_stdout(target)
        spool.cleanup()
    value = next(iter(values.values()))
    summary.update(metric=metric, value=value, positive=positive_name)
    if as_json:
        print_json(summary)
    else:
        screen.print(f"wrote {out} ({metric} {value:.4f}, n = {summary['n']:,}, positive: {positive_name})")
