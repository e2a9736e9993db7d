"""``--ray`` for ``hexamer vep``, ``score``, ``embed``, ``ism`` and ``generate``: the scale-out options turned into one call,
so the commands themselves stay thin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hexamer.cli.app import console, describe_counts, fail, print_json
from hexamer.cli.checks import is_stdio
from hexamer.cli.sequence_jobs import count_records, fail_if_none_ok, progress_bar, report_skipped

if TYPE_CHECKING:
    from hexamer.distributed import PoolSpec
    from hexamer.generation_job import GenerationResult, GenerationSettings

RayOption = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Run on a Ray cluster: auto (RAY_ADDRESS, else the cluster `ray start` runs here, else a "
        "local one), local, or an address such as ray://head:10001 (pip install 'hexamer[ray]').",
    ),
]
WorkersOption = Annotated[int, typer.Option(min=1, max=4096, help="--ray: model-holding actors.")]
ResumeOption = Annotated[
    bool,
    typer.Option("--resume/--no-resume", help="--ray: continue a killed run; committed shards are kept."),
]
GpusPerWorkerOption = Annotated[
    float, typer.Option(min=0, max=64, help="--ray: GPUs per actor (1 on GPU nodes).")
]

#: the engine's block of records (VepSettings.block_records); shards are whole blocks
BLOCK_RECORDS = 50_000


def _block_runner(entry: Callable[..., Any], spec: PoolSpec, shard_records: int | None) -> Callable[..., Any]:
    """``entry(model, *files, **options)`` on a pool of actors as ``spec`` says, in shards of
    ``shard_records``; fails now, before any work, when the shard size is not whole engine blocks."""
    if shard_records is not None and shard_records % BLOCK_RECORDS:
        raise typer.BadParameter(
            f"must be a multiple of {BLOCK_RECORDS:,} (the engine's block of records), got {shard_records}",
            param_hint="'--shard-records'",
        )

    def run(model: str, *files: Any, **options: Any) -> Any:
        return entry(model, *files, pool=spec, shard_records=shard_records, **options)

    return run


def ray_vep_runner(spec: PoolSpec, shard_records: int | None) -> Callable[..., Any]:
    """A ``run_vep(model, vcf, fasta, out, **options)`` that scores on Ray actors
    (:func:`hexamer.distributed.run_vep`)."""
    from hexamer.distributed import run_vep

    return _block_runner(run_vep, spec, shard_records)


def ray_effects_runner(spec: PoolSpec, shard_records: int | None) -> Callable[..., Any]:
    """A ``run_effects(folder, vcf, fasta, out, **options)`` (``hexamer predict --vcf``) on Ray
    actors that load the head folder (:func:`hexamer.distributed.effects.run_effects`)."""
    from hexamer.distributed.effects import run_effects

    return _block_runner(run_effects, spec, shard_records)


def ray_ism_runner(spec: PoolSpec, shard_records: int | None) -> Callable[..., Any]:
    """An ``ism(model, fasta, out, **options)`` (:func:`hexamer.distributed.ism`) on Ray actors."""
    from hexamer.distributed import ism

    return _block_runner(ism, spec, shard_records)


def _with_progress(what: str, input_file: Path, run: Callable[[Callable[[int], None]], Any]) -> Any:
    """``run(on_progress)`` under the CLI's progress bar (total: the input's records); bad input
    or a missing file ends the command with its message."""
    from hexamer.io import SequenceInputError

    try:
        with progress_bar() as progress:
            task = progress.add_task(what, total=count_records(None, input_file), rate="")
            return run(lambda n: progress.update(task, advance=n))
    except (SequenceInputError, FileNotFoundError, ValueError) as exc:
        fail(exc)


def score_on_ray(
    spec: PoolSpec,
    *,
    sequences: list[str] | None,
    input_file: Path | None,
    out: Path | None,
    model: str,
    shard_records: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """``hexamer score --ray``: the command's table, scored by Ray actors as ``spec`` says; the
    same summary."""
    from hexamer.distributed import score

    if input_file is None or sequences:
        raise typer.BadParameter("--ray reads the sequences from a file: give --input", param_hint="'--ray'")
    if out is None:
        raise typer.BadParameter("--ray writes a table: give --out FILE", param_hint="'--ray'")
    if shard_records is not None and shard_records % 256:
        raise typer.BadParameter(
            f"must be a multiple of 256 (the records of one engine call), got {shard_records}",
            param_hint="'--shard-records'",
        )
    result = _with_progress(
        "scoring",
        input_file,
        lambda progress: score(
            model, input_file, out, pool=spec, shard_records=shard_records, on_progress=progress, **options
        ),
    )
    statuses = result.status_counts
    if as_json:
        print_json({"output": str(out), "n_records": result.n_records, "status_counts": statuses})
    else:
        console.print(f"wrote {out} ({describe_counts(statuses)})")
    report_skipped(result.problems)
    fail_if_none_ok(statuses, "scored", table=True)


def embed_on_ray(
    spec: PoolSpec,
    *,
    input_file: Path,
    out: Path,
    model: str,
    shard_records: int | None,
    as_json: bool,
    **options: Any,
) -> None:
    """``hexamer embed --ray``: the command's file, embedded by Ray actors as ``spec`` says; the
    same summary."""
    from hexamer.cli.app import err_console
    from hexamer.distributed import embed

    if is_stdio(input_file):
        raise typer.BadParameter(
            "--ray reads the sequences from a file, not standard input", param_hint="'--ray'"
        )
    result = _with_progress(
        "embedding",
        input_file,
        lambda progress: embed(
            model,
            input_file,
            out,
            pool=spec,
            shard_records=shard_records,
            on_progress=progress,
            on_bad_record=lambda rec: err_console.print(f"[yellow]skipped[/yellow] {rec}"),
            **options,
        ),
    )
    n, bad = result.n_records, len(result.errors)
    if as_json:
        print_json({"output": str(out), "n_records": n, "n_without_vector": bad})
    else:
        console.print(f"wrote {out} ({n:,} records, {bad:,} without a vector)")


def generate_on_ray(
    spec: PoolSpec,
    *,
    sequences: list[str] | None,
    input_file: Path | None,
    out: Path | None,
    model: str,
    shard_records: int | None,
    resume: bool,
    settings: GenerationSettings,
    batch_size: int,
) -> GenerationResult:
    """``hexamer generate --ray``: the command's file, generated by Ray actors as ``spec`` says."""
    from hexamer.distributed import generate
    from hexamer.generation_job import chunk_records

    if input_file is None or sequences or is_stdio(input_file):
        raise typer.BadParameter(
            "--ray reads the prompts from a file: give --input FILE", param_hint="'--ray'"
        )
    if out is None:
        raise typer.BadParameter(
            "--ray writes a file (its shards are kept for --resume): give --out FILE", param_hint="'--ray'"
        )
    chunk = chunk_records(settings.n)
    if shard_records is not None and shard_records % chunk:
        raise typer.BadParameter(
            f"must be a multiple of {chunk} (the records of one engine call with --n {settings.n}), "
            f"got {shard_records}",
            param_hint="'--shard-records'",
        )
    return _with_progress(
        "generating",
        input_file,
        lambda progress: generate(
            model,
            input_file,
            out,
            settings=settings,
            pool=spec,
            batch_size=batch_size,
            shard_records=shard_records,
            resume=resume,
            on_progress=progress,
        ),
    )
