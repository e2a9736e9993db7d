"""``hexamer generate`` on a Ray cluster, with the file a single-process run writes, byte for byte
(given a ``seed``: unseeded samples differ from run to run anyway).

Shards are whole multiples of the job's chunk of records
(:func:`~hexamer.generation_job.chunk_records`), so every engine call sees the records a single
process gives it, and each sample draws from its own seeded stream. A committed shard keeps each
chunk's rows as one JSON line (:mod:`~hexamer.distributed.chunk_lines`); the merge replays the
chunks in input order into one :class:`~hexamer.job_output.JobOutput`, the writer and batches of
the single-process job.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hexamer.distributed.chunk_lines import read_chunk_lines, write_chunk_lines
from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.driver import ShardRun, check_job, drive, file_handlers, job_store, pool_for
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.sharding import shards_of
from hexamer.distributed.store import ShardStore, file_identity
from hexamer.generation_job import (
    GenerationResult,
    GenerationSettings,
    chunk_records,
    failed_rows,
)
from hexamer.io import read_sequences
from hexamer.job_output import JobOutput, check_sequence_output

__all__ = ["DEFAULT_SHARD_CHUNKS", "generate"]

PathLike = str | os.PathLike[str]
_FORMAT = "hexamer-ray-generate/1"
#: default shard: this many engine calls' records
DEFAULT_SHARD_CHUNKS = 16


def _failed_chunks(records: Sequence[Any], reason: str, settings: GenerationSettings) -> list[dict[str, Any]]:
    """The chunks of a shard that kept failing: every record and sample, status ``failed``."""
    size = chunk_records(settings.n)
    out = []
    for at in range(0, len(records), size):
        chunk = failed_rows(records[at : at + size], reason, settings)
        out.append({"rows": chunk.rows, "statuses": chunk.statuses, "problems": [], "written_bp": 0})
    return out


def generate(
    model: PathLike | None,
    input_file: PathLike,
    output: PathLike,
    *,
    settings: GenerationSettings | None = None,
    pool: WorkerPool | PoolSpec | None = None,
    batch_size: int = 16,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    fault: FaultPlan | None = None,
) -> GenerationResult:
    """``hexamer generate -i INPUT -o OUTPUT`` on Ray actors; with ``settings.seed`` the file equals
    the command's. ``output`` is a FASTA or a table, by extension.

    ``shard_records`` (default 16 engine calls' records) must be a multiple of
    :func:`~hexamer.generation_job.chunk_records` (256 // ``settings.n``). ``pool``, ``resume``,
    ``max_attempts`` and ``fault`` are as for :func:`hexamer.distributed.run_vep`; ``batch_size``
    (sequences decoded together) as for ``hexamer generate``. ``on_progress`` hears records done."""
    settings = settings or GenerationSettings()
    if settings.sampler is not None:
        raise ValueError("settings.sampler is for a served model; the actors run the model themselves")
    run = ShardRun(Path(output), shard_records, max_attempts, resume, fault, on_note, on_progress)
    check_sequence_output(run.out)  # an unsupported extension fails now
    check_job(run.out, {"sequence": input_file})
    chunk = chunk_records(settings.n)
    size = DEFAULT_SHARD_CHUNKS * chunk if run.shard_records is None else run.shard_records
    if size < 1 or size % chunk:
        raise ValueError(
            f"shard_records must be a positive multiple of {chunk} (the records of one engine call "
            f"in hexamer generate with n={settings.n}), got {size}"
        )
    options = settings.as_dict()
    with pool_for(pool, model, batch_size) as workers_pool:
        job = {
            "format": _FORMAT,
            "settings": {**options, "batch_size": batch_size},
            "input": file_identity(input_file),
        }
        store = job_store(run, job, workers_pool, size)
        done, failed = file_handlers(
            store,
            run,
            write_chunk_lines,
            lambda chunks: sum(len(c["statuses"]) for c in chunks),
            lambda shard, why: _failed_chunks(shard.records, why, settings),
            "its records are marked failed",
            verb="generation",
        )
        feed = drive(
            workers_pool,
            run,
            store,
            shards_of(read_sequences(os.fspath(input_file)), size),
            lambda actor, shard: actor.generate_shard.remote(shard.index, shard.records, options, fault),
            done,
            failed,
        )
    result = _merge(store, run.out)
    store.remove()
    result.n_resumed = feed.n_resumed
    return result


def _merge(store: ShardStore, out: Path) -> GenerationResult:
    """The committed shards, chunk by chunk in input order, written as the single process writes them."""
    statuses: Counter[str] = Counter()
    result = GenerationResult(output=str(out))
    output = JobOutput(out)
    try:
        for index in sorted(store.entries):
            for chunk in read_chunk_lines(store.path(index)):
                output.add(chunk["rows"], "sequence")
                statuses.update(chunk["statuses"])
                result.problems.extend(chunk["problems"])
                result.written_bp += chunk["written_bp"]
    except BaseException:
        output.abort()
        raise
    output.close()
    result.status_counts = dict(statuses)
    result.n_records = sum(statuses.values())
    return result
