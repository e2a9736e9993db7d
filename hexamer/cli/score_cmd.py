"""``hexamer score``: log-likelihood of each sequence of a file (or the command line), written as a
table with one row per record (bad records too, with their ``status`` and ``error``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

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
from hexamer.cli.ray_options import RayRun, check_resume, ray_options
from hexamer.cli.scaleout import ResumeOption
from hexamer.cli.sequence_jobs import (
    chunks,
    count_records,
    fail_if_none_ok,
    progress_bar,
    read_job_records,
    report_skipped,
)
from hexamer.job_output import JobOutput, check_table_output


@app.command()
@served.server_options
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
    level: Annotated[
        Literal["bp", "token"], typer.Option(help="bp (mean per-base log-likelihood) or token.")
    ] = "bp",
    method: Annotated[
        Literal["fns", "exact"],
        typer.Option(help="fns (published marginals) or exact (within-token chain rule)."),
    ] = "fns",
    prefix: PrefixOption = "",
    per_base: Annotated[
        bool, typer.Option("--per-base/--no-per-base", help="Also write per-base log-probabilities.")
    ] = False,
    batch_size: Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE)] = 16,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")] = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Log-likelihood of DNA sequences under the model (bp or token level).

    Exits with status 1 (after writing the whole output) when no record is ok."""
    from hexamer.sequence_scores import SCORE_CHUNK, score_record_rows

    check_choice("--level", level, ("bp", "token"))
    check_choice("--method", method, ("fns", "exact"))
    served.check_server_choice(server, model, ray, command)
    check_runtime(dtype=dtype, device=None if ray else device)  # --ray: the workers' device
    if is_stdio(out):
        out = None  # "-o -": the TSV on stdout
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
            level=level,
            method=method,
            prefix=prefix,
            per_base=per_base,
            batch_size=batch_size,
        )
    records = read_job_records(sequences or [], input_file)  # an unusable file stops us before the load
    carbon = served.open_model(server, model, dtype, device, batch_size, command)
    output = JobOutput(out) if out is not None else None
    stdout_rows: list[dict[str, Any]] = []
    all_statuses: list[str] = []
    bad: list[str] = []
    scored_bp = 0
    try:
        with progress_bar() as progress:
            task = progress.add_task("scoring", total=count_records(sequences, input_file), rate="")
            for chunk in chunks(records, SCORE_CHUNK):
                scored = score_record_rows(
                    carbon,
                    chunk,
                    level=level,
                    method=method,
                    prefix=prefix,
                    per_base=per_base,
                    batch_size=batch_size,
                )
                rows = scored.rows
                bad.extend(scored.problems)
                scored_bp += scored.scored_bp
                elapsed = progress.tasks[task].elapsed or 1e-9
                progress.update(task, advance=len(rows), rate=f"{scored_bp / elapsed:,.0f} bp/s")
                all_statuses.extend(r["status"] for r in rows)
                if output is not None:
                    output.add(rows, None)
                else:
                    stdout_rows.extend(rows)
    except BaseException:
        if output is not None:
            output.abort()
        raise
    statuses: dict[str, int] = {}
    for status in all_statuses:
        statuses[status] = statuses.get(status, 0) + 1
    if output is not None:
        output.close()
        if as_json:
            print_json({"output": str(out), "n_records": len(all_statuses), "status_counts": statuses})
        else:
            console.print(f"wrote {out} ({describe_counts(statuses)})")
    else:
        columns = list(stdout_rows[0]) if stdout_rows else []
        print("\t".join(columns))
        for row in stdout_rows:
            print("\t".join(_cell(row[c]) for c in columns))
    report_skipped(bad)
    fail_if_none_ok(statuses, "scored", table=True)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if hasattr(value, "tolist"):
        return ",".join(f"{v:.6g}" for v in value.tolist())
    return str(value)
