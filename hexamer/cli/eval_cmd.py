"""``hexamer eval``: the published zero-shot tasks on a model, with a cache, CIs and a report."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from hexamer.cli.app import (
    DTypeOption,
    ModelOption,
    app,
    cache_dir,
    console,
    err_console,
    fail,
    resolve_model,
)
from hexamer.cli.checks import is_stdio, path_option
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.io.stdio import copy_to_stdout
from hexamer.progress import progress_bar

if TYPE_CHECKING:
    from hexamer.evals.job import EvalJobSettings

LEVELS = ("token", "bp", "both")


def parse_option(text: str) -> tuple[str, Any]:
    """``key=value`` with the value read as JSON when it parses (numbers, true/false, null), else a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"--option needs key=value, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def _task_list(task: list[str] | None, suite: str | None) -> list[str]:
    from hexamer.evals.registry import TASK_NAMES

    if suite is not None:
        if suite != "all":
            raise typer.BadParameter(f"--suite takes 'all', got {suite!r}")
        return list(TASK_NAMES)
    names = [n.strip() for t in task or [] for n in t.split(",") if n.strip()]
    if not names:
        raise typer.BadParameter(f"give --task NAME (one of {', '.join(TASK_NAMES)}) or --suite all")
    unknown = [n for n in names if n not in TASK_NAMES]
    if unknown:
        raise typer.BadParameter(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASK_NAMES)}")
    return names


def _job_settings(
    limit: int | None,
    batch_size: int,
    cache: Path | None,
    use_cache: bool,
    out: Path,
    report: Path | None,
    seed: int,
    bootstrap: int,
    option: list[str] | None,
    hg38: Path | None,
    context_length: int | None,
) -> EvalJobSettings:
    from hexamer.evals.job import REPORT_SUFFIXES, EvalJobSettings

    if report is not None and not is_stdio(report) and report.suffix.lower() not in REPORT_SUFFIXES:
        raise typer.BadParameter("--report must end in .html, .md or .json")
    options: dict[str, Any] = dict(parse_option(o) for o in option or [])
    if hg38 is not None:
        options["hg38"] = str(hg38)
    if context_length is not None:
        options["context_length"] = context_length
    return EvalJobSettings(
        limit=limit,
        seed=seed,
        batch_size=batch_size,
        options=options,
        cache_dir=None if not use_cache else (cache or cache_dir() / "evals"),
        out_dir=out,
        n_boot=bootstrap,
        report=report,  # "-": standard output, written by the command
    )


#: How each task runs and where its files go, handed to ``eval`` as one
#: :class:`~hexamer.evals.job.EvalJobSettings`.
eval_job_options = option_group(
    "settings",
    (
        (
            "limit",
            Annotated[
                int | None,
                typer.Option(min=1, help="Score a seeded sample of N rows (as the scripts' --max_samples)."),
            ],
            None,
        ),
        ("batch_size", Annotated[int, typer.Option(min=1, help="Sequences per forward pass.")], 16),
        (
            "cache",
            Annotated[
                Path | None,
                path_option(
                    "Per-example record cache (default: the hexamer cache).",
                    "it is a folder of cached records",
                    "--cache-dir",
                ),
            ],
            None,
        ),
        (
            "use_cache",
            Annotated[
                bool, typer.Option("--cache/--no-cache", help="Read and write the per-example record cache.")
            ],
            True,
        ),
        (
            "out",
            Annotated[
                Path,
                path_option(
                    "Folder for per-task JSON, records and plots (--report - puts the report on stdout).",
                    "it is a folder of several files; --report - writes the report to stdout",
                    "--out",
                    "-o",
                ),
            ],
            Path("hexamer-eval"),
        ),
        (
            "report",
            Annotated[
                Path | None,
                typer.Option(
                    help="Also write a report: .html (self-contained), .md or .json; - writes Markdown to stdout."
                ),
            ],
            None,
        ),
        ("seed", Annotated[int, typer.Option(help="Seed of the --limit sample and the bootstrap.")], 0),
        (
            "bootstrap",
            Annotated[int, typer.Option(min=0, help="Bootstrap resamples for the 95% CIs (0: none).")],
            1000,
        ),
        (
            "option",
            Annotated[
                list[str] | None,
                typer.Option(
                    "--option", "-O", help="Task option key=value, e.g. context_length=48000, window=4096."
                ),
            ],
            None,
        ),
        (
            "hg38",
            Annotated[
                Path | None,
                path_option(
                    "ClinVar: hg38.parquet (ID, Sequence) or a FASTA.",
                    "the genome is looked up by chromosome: Parquet and FASTA indexes need a file",
                ),
            ],
            None,
        ),
        (
            "context_length",
            Annotated[
                int | None, typer.Option(help="ClinVar: left context in bp (24000 published; 48000 too).")
            ],
            None,
        ),
    ),
    _job_settings,
)


def _levels(
    level: str, names: list[str], suite: str | None, data: str | None, data_root: Path | None
) -> tuple[Any, ...]:
    """The levels ``--level`` asks for, once the data options are known to make sense together."""
    if level not in LEVELS:
        raise typer.BadParameter(f"--level must be one of {', '.join(LEVELS)}")
    if suite is None and data is None and data_root is None:
        raise typer.BadParameter("give --data PATH (one task) or --data-root DATA")
    if suite is None and data is not None and len(names) > 1:
        raise typer.BadParameter("--data is one task's data; for several tasks use --data-root")
    return ("token", "bp") if level == "both" else (level,)


@app.command("eval")
@eval_job_options
def eval_cmd(
    model: ModelOption = None,
    task: Annotated[
        list[str] | None,
        typer.Option(
            "--task",
            "-t",
            help="Task(s): sr, brca2, traitgym, clinvar_coding, clinvar_noncoding, triplet, codon, niah.",
        ),
    ] = None,
    suite: Annotated[
        str | None, typer.Option(help="'all': every task whose data is under --data-root.")
    ] = None,
    data: Annotated[
        str | None,
        path_option(
            "The task's file or folder (local, or hf://datasets/ORG/NAME/FILE).",
            "a task finds its data files by name and format (e.g. test.parquet)",
            "--data",
            "-d",
        ),
    ] = None,
    data_root: Annotated[
        Path | None,
        path_option(
            "Folder holding the datasets in their public layout (see docs/evals.md).",
            "it is a folder of datasets",
        ),
    ] = None,
    level: Annotated[str, typer.Option(help="token (the published headline), bp (FNS), or both.")] = "both",
    settings: EvalJobSettings = FILLED,  # how tasks run, where files go (eval_job_options)
    dtype: DTypeOption = "auto",
    device: Annotated[
        str | None, typer.Option(help="cpu, cuda, cuda:1 ... (default: cuda when present).")
    ] = None,
) -> None:
    """Run the published zero-shot tasks (token and/or bp level) and report them beside the published numbers."""
    from hexamer.carbon import Carbon
    from hexamer.engine import EngineConfig
    from hexamer.evals.job import run_evaluation, write_eval_outputs
    from hexamer.evals.report import default_meta, write_report
    from hexamer.evals.task import DatasetSchemaError

    names = _task_list(task, suite)
    levels = _levels(level, names, suite, data, data_root)
    report_to_stdout = is_stdio(settings.report)
    screen = err_console if report_to_stdout else console  # stdout then carries the report alone
    path = resolve_model(model)
    engine = EngineConfig(max_batch_size=settings.batch_size)
    carbon = Carbon.from_pretrained(path, dtype=dtype, device=device, engine=engine)
    single = data if suite is None else None  # one task's data; else a suite under a root
    with progress_bar("{task.description}", console=err_console, transient=False) as progress:
        try:
            results = run_evaluation(
                carbon,
                names,
                levels,
                settings,
                data=single,
                data_root=data_root if data_root is not None else Path(data or "."),
                export_dir=cache_dir() / "datasets",
                progress=progress,
                on_note=lambda note: err_console.print(f"[yellow]{note}[/yellow]"),
            )
        except (DatasetSchemaError, FileNotFoundError, ValueError) as exc:
            fail(exc)
    _print_table(results, screen)
    meta = default_meta(str(path), carbon.backend.fingerprint(), " ".join(["hexamer", *sys.argv[1:]]))
    to_files = replace(settings, report=None) if report_to_stdout else settings
    screen.print(f"wrote {write_eval_outputs(results, to_files, meta)}")
    if report_to_stdout:
        with tempfile.TemporaryDirectory(prefix="hexamer-report-") as tmp:
            write_report(results, Path(tmp) / "report.md", meta)
            copy_to_stdout(Path(tmp) / "report.md")
    elif settings.report is not None:
        screen.print(f"wrote {settings.report}")
    if any(r.status == "error" for r in results):
        raise typer.Exit(1)


def _print_table(results: list[Any], screen: Any = console) -> None:
    from hexamer.evals.report import report_rows

    rows = report_rows(results)
    table = Table(title="zero-shot evaluation (values in %, 95% bootstrap CI)")
    columns = ("Task", "Level", "n", "Metric", "Value [95% CI]", "Carbon-3B", "Carbon-8B", "Status")
    for c in columns:
        table.add_column(c, justify="left" if c in ("Task", "Level", "Metric", "Status") else "right")
    for row, r in zip(rows, results, strict=True):
        cells = dict(row)
        if r.status != "ok":  # the full reason is in summary.json and the report
            cells["Status"] = f"{r.status}: {r.reason.split(' (', 1)[0][:60]}"
        table.add_row(*(cells[c] for c in columns))
    screen.print(table)
