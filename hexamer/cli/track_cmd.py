"""``hexamer track``: per-base bigWig/bedGraph tracks and a UCSC track hub (hexamer.tracks)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.markup import escape

from hexamer.cli import server_options as served
from hexamer.cli.app import (
    CpuThreadsOption,
    DTypeOption,
    JsonFlag,
    app,
    console,
    err_console,
    fail,
    print_json,
)
from hexamer.cli.checks import PrefixOption, check_choice, check_runtime, fasta_option, path_option
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.sequence_jobs import progress_bar, set_threads

if TYPE_CHECKING:
    from hexamer.tracks import TrackRunResult, TrackSettings

#: longest window or stride accepted on the command line (bases): 1 Gbp, far past any context
MAX_BP = 10**9


def _formats(text: str) -> tuple[str, ...]:
    from hexamer.tracks import FORMATS

    items = tuple(dict.fromkeys(x.strip().lower() for x in text.split(",") if x.strip()))
    if not items or not set(items) <= set(FORMATS):
        raise typer.BadParameter(
            f"--format must be a comma-separated subset of {', '.join(FORMATS)}, got {text!r}",
            param_hint="'--format'",
        )
    return items


def _track_settings(
    kinds: str,
    formats: str,
    hub: bool,
    genome: str | None,
    hub_email: str,
    window: int | None,
    stride: int | None,
    method: str,
    prefix: str,
) -> TrackSettings:
    from hexamer.tracks import TrackSettings, parse_kinds

    check_choice("--method", method, ("fns", "exact"))
    try:
        kind_list = parse_kinds(kinds)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--kinds'") from None
    format_list = _formats(formats)
    if hub:
        if genome is None:
            raise typer.BadParameter(
                "--hub needs the UCSC assembly the FASTA is (e.g. --genome hg38)", param_hint="'--genome'"
            )
        if "bigwig" not in format_list:
            raise typer.BadParameter(
                "--hub needs --format bigwig (a hub serves bigWig files)", param_hint="'--format'"
            )
        if "prob" not in kind_list:
            kind_list = (*kind_list, "prob")  # the hub's stacked A/C/G/T logo
    return TrackSettings(
        kinds=tuple(kind_list),
        formats=format_list,
        window=window,
        stride=stride,
        method=method,  # type: ignore[arg-type]
        prefix=prefix,
        hub_genome=genome if hub else None,
        hub_email=hub_email,
    )


#: The options that decide the files, handed to ``track`` as one
#: :class:`~hexamer.tracks.TrackSettings` (checked together: ``--hub`` needs ``--genome`` and bigWig).
track_options = option_group(
    "settings",
    (
        (
            "kinds",
            Annotated[
                str,
                typer.Option(help="Comma-separated: logprob (A/C/G/T + ref), prob (A/C/G/T), entropy, llr."),
            ],
            "logprob,entropy,llr",
        ),
        (
            "formats",
            Annotated[
                str, typer.Option("--format", help="Comma-separated: bigwig, bedgraph, bedgraph.gz (BGZF).")
            ],
            "bigwig",
        ),
        (
            "hub",
            Annotated[
                bool,
                typer.Option(
                    "--hub/--no-hub", help="Also write hub.txt, genomes.txt, trackDb.txt (adds prob)."
                ),
            ],
            False,
        ),
        (
            "genome",
            Annotated[
                str | None,
                typer.Option(
                    help="UCSC assembly name of the FASTA for --hub, e.g. hg38 (required with --hub)."
                ),
            ],
            None,
        ),
        (
            "hub_email",
            Annotated[str, typer.Option(help="Contact e-mail written into hub.txt.")],
            "unknown@example.org",
        ),
        (
            "window",
            Annotated[
                int | None,
                typer.Option(
                    min=6, max=MAX_BP, help="Window in bp, a multiple of 6 (default: the whole context)."
                ),
            ],
            None,
        ),
        (
            "stride",
            Annotated[
                int | None,
                typer.Option(
                    min=1, max=MAX_BP, help="Stride in bp, a multiple of 6 (default: half the window)."
                ),
            ],
            None,
        ),
        (
            "method",
            Annotated[
                Literal["fns", "exact"],
                typer.Option(help="fns marginals or exact within-6-mer conditionals."),
            ],
            "fns",
        ),
        ("prefix", PrefixOption, ""),
    ),
    _track_settings,
)


@app.command()
@served.server_options
@track_options
def track(
    command: typer.Context,
    fasta: Annotated[Path, fasta_option("Reference FASTA: .fa, .fa.gz (bgzip or gzip), indexed or not.")],
    out: Annotated[
        Path,
        path_option(
            "Output folder (created; its parent must exist).", "it is a folder of tracks", "--out", "-o"
        ),
    ],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region",
            "-r",
            help="CONTIG or CONTIG:START-END (1-based, inclusive); repeatable. Default: every contig.",
        ),
    ] = None,
    settings: TrackSettings = FILLED,  # the track options (track_options)
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ...")] = None,
    threads: CpuThreadsOption = None,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Per-base tracks along a region or a whole FASTA: log P(A/C/G/T | context), log P(ref),
    entropy (bits) and mean alt LLR, as bigWig/bedGraph; unscored bases are absent, not zero."""
    from hexamer.io.fasta import FastaError
    from hexamer.tracks import MissingDependencyError, RegionError, read_regions, run_tracks
    from hexamer.tracks.hub import contig_name_problem

    served.check_server_choice(server, model, command=command)
    check_runtime(dtype=dtype, device=device, threads=threads)
    _check_track_files(fasta, out, settings)
    set_threads(threads)
    try:  # a bad region or FASTA fails before the model loads
        chosen = read_regions(fasta, region)
    except (RegionError, FastaError, ValueError, OSError) as exc:
        fail(exc)
    warnings = []
    genome = settings.hub_genome
    if genome is not None and (problem := contig_name_problem(genome, [r.contig for r in chosen])):
        warnings.append(problem)
        err_console.print(f"[yellow]warning:[/yellow] {escape(problem)}")
    carbon = served.open_model(server, model, dtype, device, 1, command)
    if server is not None:  # the server's per-base log-probabilities, window by window
        name = Path(carbon.backend.served_model).name  # type: ignore[attr-defined]
    else:
        name = Path(carbon.tokenizer.name_or_path or "model").name
    try:
        with progress_bar() as progress:
            task = progress.add_task("scoring bases", total=None, rate="")

            def tick(done: int, total: int) -> None:
                elapsed = progress.tasks[task].elapsed or 1e-9
                progress.update(task, completed=done, total=total, rate=f"{done / elapsed:,.0f} bp/s")

            result = run_tracks(
                carbon, fasta, out, regions=region, model_name=name, progress=tick, **settings.as_dict()
            )
    except (RegionError, FastaError, MissingDependencyError, ValueError, OSError) as exc:
        fail(exc)
    _report_tracks(result, out, warnings, as_json)


def _check_track_files(fasta: Path, out: Path, settings: TrackSettings) -> None:
    """The FASTA, the output's parent folder, and pyBigWig when bigWig files are asked for."""
    from hexamer.tracks import MissingDependencyError

    if not fasta.is_file():
        raise typer.BadParameter(f"{fasta} does not exist", param_hint="'--fasta'")
    if not out.parent.is_dir():
        raise typer.BadParameter(f"folder {str(out.parent)!r} does not exist", param_hint="'--out'")
    if "bigwig" in settings.formats:
        from hexamer.tracks.writers import import_pybigwig

        try:
            import_pybigwig()
        except MissingDependencyError as exc:
            fail(exc)


def _report_tracks(result: TrackRunResult, out: Path, warnings: list[str], as_json: bool) -> None:
    """The summary (``--json``: one object); exit status 1 when some bases failed."""
    summary = result.summary()
    if warnings:
        summary["warnings"] = warnings
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {len(result.files)} files into {out}: {result.n_bases:,} bases, {result.n_scored:,} scored, "
            f"{result.n_absent:,} absent (N or <oov> 6-mers), {result.bp_per_s:,.0f} bp/s "
            f"(window {result.window:,} bp, stride {result.stride:,} bp)"
        )
    if result.n_failed:  # the files are written, without these bases: say so and exit 1
        fail(
            f"{result.n_failed:,} bases in {result.n_failed_windows:,} windows failed and are absent from "
            f"the files; first: {result.failures[0]}",
            code=1,
        )
