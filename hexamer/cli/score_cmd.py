"""``hexamer score``: log-likelihood of each sequence of a file (or the command line), written as a
table with one row per record (bad records too, with their ``status`` and ``error``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from hexamer.cli import server_options as served
from hexamer.cli.app import (
    DTypeOption,
    JsonFlag,
    app,
    console,
    describe_counts,
    print_json,
    resolve_model,
)
from hexamer.cli.checks import (
    MAX_BATCH_SIZE,
    PrefixOption,
    check_choice,
    check_output,
    check_runtime,
    is_stdio,
)
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.ray_options import RayRun, check_resume, ray_options
from hexamer.cli.scaleout import ResumeOption
from hexamer.cli.sequence_jobs import (
    count_records,
    fail_if_none_ok,
    job_progress,
    read_job_records,
    report_skipped,
)

if TYPE_CHECKING:
    from hexamer.sequence_scores import ScoreSettings
from hexamer.job_output import check_table_output


def _score_settings(**options: Any) -> ScoreSettings:
    from hexamer.sequence_scores import ScoreSettings

    return ScoreSettings(**options)


#: The options that decide the scores, handed to ``score`` as one
#: :class:`~hexamer.sequence_scores.ScoreSettings` (the local and the ``--ray`` job take it whole).
score_options = option_group(
    "settings",
    (
        (
            "level",
            Annotated[
                Literal["bp", "token"], typer.Option(help="bp (mean per-base log-likelihood) or token.")
            ],
            "bp",
        ),
        (
            "method",
            Annotated[
                Literal["fns", "exact"],
                typer.Option(help="fns (published marginals) or exact (within-token chain rule)."),
            ],
            "fns",
        ),
        ("prefix", PrefixOption, ""),
        (
            "per_base",
            Annotated[
                bool, typer.Option("--per-base/--no-per-base", help="Also write per-base log-probabilities.")
            ],
            False,
        ),
        ("batch_size", Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)], 16),
    ),
    _score_settings,
)


@app.command()
@served.server_options
@score_options
@ray_options(
    Annotated[
        int | None, typer.Option(min=1, help="--ray: records per shard, a multiple of 256 (default 4,096).")
    ]
)
def score(
    command: typer.Context,
    sequences: Annotated[list[str] | None, typer.Argument(help="DNA sequences to score.")] = None,
    input_file: Annotated[
        Path | None, typer.Option("--input", "-i", help="FASTA/FASTQ/txt/TSV/CSV/Parquet.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help=".tsv, .csv, .jsonl or .parquet; default (or -): TSV on stdout."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")] = None,
    settings: ScoreSettings = FILLED,  # the scoring options (score_options)
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Log-likelihood of DNA sequences under the model (bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    from hexamer.sequence_scores import run_scoring

    check_choice("--level", settings.level, ("bp", "token"))
    check_choice("--method", settings.method, ("fns", "exact"))
    served.check_server_choice(server, model, ray, command)
    check_runtime(dtype=dtype, device=None if ray else device)  # --ray: the workers' device
    out = None if is_stdio(out) else out  # "-o -": the TSV on stdout
    if as_json and out is None:
        raise typer.BadParameter("--json needs --out FILE: stdout carries the scores")
    if out is not None:
        check_output("--out", out, check_table_output)  # before scoring, not after
    check_resume(resume, ray)
    if ray is not None:
        from hexamer.cli.scaleout import score_on_ray

        return score_on_ray(
            ray.pool(threads=None, dtype=dtype, device=device),
            sequences=sequences,
            input_file=input_file,
            out=out,
            model=resolve_model(model),
            shard_records=ray.shard_records,
            as_json=as_json,
            resume=resume,
            **settings.as_dict(),
        )
    records = read_job_records(sequences or [], input_file)  # an unusable file stops us before the load
    carbon = served.open_model(server, model, dtype, device, settings.batch_size, command)
    with job_progress("scoring", count_records(sequences, input_file)) as bar:
        result = run_scoring(
            carbon, records, out, settings, on_progress=bar.advance, on_bases=lambda n: bar.count(n, "bp")
        )
    statuses = result.status_counts
    if out is None:
        _print_rows(result.rows)
    elif as_json:
        print_json({"output": str(out), "n_records": result.n_records, "status_counts": statuses})
    else:
        console.print(f"wrote {out} ({describe_counts(statuses)})")
    report_skipped(result.problems)
    fail_if_none_ok(statuses, "scored", table=True)


def _print_rows(rows: list[dict[str, Any]]) -> None:
    """The rows as TSV on standard output (numbers to 6 significant digits)."""
    columns = list(rows[0]) if rows else []
    print("\t".join(columns))
    for row in rows:
        print("\t".join(_cell(row[c]) for c in columns))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if hasattr(value, "tolist"):
        return ",".join(f"{v:.6g}" for v in value.tolist())
    return str(value)
