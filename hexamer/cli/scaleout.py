"""``--ray`` for ``hexamer vep``: the scale-out options turned into a runner with
:func:`hexamer.vep.run_vep`'s signature, so the command itself stays one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from hexamer.cli.app import fail

#: the engine's block of records (VepSettings.block_records); shards are whole blocks
BLOCK_RECORDS = 50_000


def ray_vep_runner(
    address: str,
    *,
    workers: int,
    shard_records: int | None,
    num_gpus: float,
    threads: int | None,
    dtype: str,
    device: str | None,
) -> Callable[..., Any]:
    """A ``run_vep(model, vcf, fasta, out, **options)`` that scores on Ray actors; fails now,
    before any work, when Ray is missing or the shard size cannot give the single-process output."""
    from hexamer.distributed import RayUnavailableError, require_ray
    from hexamer.distributed import run_vep as run_on_ray

    try:
        require_ray()
    except RayUnavailableError as exc:
        fail(exc)
    if shard_records is not None and shard_records % BLOCK_RECORDS:
        raise typer.BadParameter(
            f"must be a multiple of {BLOCK_RECORDS:,} (the engine's block of records), got {shard_records}",
            param_hint="'--shard-records'",
        )

    def run(model: str, vcf: Any, fasta: Any, out: Any, **options: Any) -> Any:
        return run_on_ray(
            model,
            vcf,
            fasta,
            out,
            address=address,
            workers=workers,
            shard_records=shard_records,
            num_gpus=num_gpus,
            threads=threads or 1,
            dtype=dtype,
            device=device,
            **options,
        )

    return run
