"""``hexamer predict --vcf`` on a Ray cluster: a fine-tuned head's variant effects, with the output
a single-process run (:func:`hexamer.finetune.effects.run_effects`) writes, byte for byte.

It is the VEP driver (:func:`hexamer.distributed.vep.run_vep`) with a head folder as the model:
each actor loads the folder as a head (:class:`~hexamer.distributed.worker.ShardWorker`) and
scores its shards with the head's runner; the driver plans the settings from the folder's
config.json alone (no weights in the driver) and writes the effect columns beside the standard ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.vep import run_vep
from hexamer.finetune.apply import read_head_settings
from hexamer.finetune.effects import effect_columns, effect_settings
from hexamer.vep.job import VepRunResult
from hexamer.vep.rows import row_schema
from hexamer.vep.settings import VepSettings
from hexamer.vep.vcf_header import extra_info

__all__ = ["run_effects"]

PathLike = str | os.PathLike[str]


def run_effects(
    folder: PathLike,
    vcf: PathLike,
    fasta: PathLike,
    output: PathLike,
    *,
    pool: WorkerPool | PoolSpec | None = None,
    window: int | None = None,
    rc_average: bool | None = None,
    batch_size: int = 32,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
    info_fields: str | Sequence[str] | None = None,
    command: str | None = None,
    fault: FaultPlan | None = None,
    settings: VepSettings | None = None,
) -> VepRunResult:
    """Variant effects of the head folder ``folder`` on Ray actors (``pool`` as for
    :func:`hexamer.distributed.run_vep`: a :class:`PoolSpec` started for the job, or a running
    :class:`WorkerPool` of actors that loaded ``folder``). ``settings`` (default:
    :func:`~hexamer.finetune.effects.effect_settings` of the folder with ``window``,
    ``rc_average`` and ``batch_size``) must be what the single-process run used for the outputs
    to be equal."""
    head = read_head_settings(folder)
    if settings is None:
        settings = effect_settings(head, window=window, rc_average=rc_average, batch_size=batch_size)
    columns = effect_columns(head.task)
    row_schema(columns)  # a label column named like a standard one fails now, before any actor starts
    extra_info(columns)
    return run_vep(
        folder,
        vcf,
        fasta,
        output,
        pool=pool,
        shard_records=shard_records,
        max_attempts=max_attempts,
        resume=resume,
        on_progress=on_progress,
        on_note=on_note,
        renames=renames,
        info_fields=info_fields,
        command=command,
        fault=fault,
        settings=settings,
        extra_columns=columns,
    )
