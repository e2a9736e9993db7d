"""``hexamer embed`` on a Ray cluster, with the file a single-process run writes, byte for byte.

:func:`~hexamer.embed.embed_sequences` runs records in groups that end once they hold
:data:`~hexamer.embed.pooling.GROUP_PROMPTS` prompts, and a record's vector depends on its group's
batches. So the driver counts each record's prompts (:func:`~hexamer.embed.pooling.prompt_count`,
tokenising only, with the geometry an actor reports) and ends a shard only where a group ends,
once it holds ``shard_records`` records. Shards are committed as Parquet (float32 vectors
exactly) and merged in input order through :func:`~hexamer.embed.write_embeddings`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.driver import ShardRun, check_job, drive, file_handlers, job_store, pool_for
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.sharding import Shard
from hexamer.distributed.store import file_identity
from hexamer.embed import EMBEDDING_FORMATS, write_embeddings
from hexamer.embed.pooling import GROUP_PROMPTS, POOLS, prompt_count
from hexamer.io import BadRecord, SequenceRecord, read_sequences

__all__ = ["EmbedRunResult", "embed"]

PathLike = str | os.PathLike[str]
_FORMAT = "hexamer-ray-embed/1"
DEFAULT_SHARD_RECORDS = 1024


@dataclass
class EmbedRunResult:
    """A finished job: records written, those without a vector (id -> reason), rows resumed."""

    output: str
    n_records: int
    errors: dict[str, str]
    n_resumed: int = 0


def group_shards(
    records: Iterable[SequenceRecord], size: int, count: Callable[[SequenceRecord], int]
) -> Iterator[Shard[SequenceRecord]]:
    """Shards of at least ``size`` records (the last may be shorter) that end where an embedding
    group ends (``count`` gives a record's prompts; a group ends at :data:`GROUP_PROMPTS`)."""
    batch: list[SequenceRecord] = []
    index = first = group = 0
    for rec in records:
        batch.append(rec)
        group += count(rec)
        if group >= GROUP_PROMPTS:
            group = 0
            if len(batch) >= size:
                yield Shard(index, first, batch)
                index, first, batch = index + 1, first + len(batch), []
    if batch:
        yield Shard(index, first, batch)


def _write_shard(path: Path, value: tuple[list[tuple[str, Any]], dict[str, str]]) -> None:
    """A shard's ``(id, vector or None)`` items and why each vector is missing, as Parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    items, errors = value
    vectors = [None if v is None else np.asarray(v, np.float32).reshape(-1) for _, v in items]
    table = pa.table(
        {
            "id": pa.array([i for i, _ in items], pa.string()),
            "embedding": pa.array(vectors, pa.list_(pa.float32())),
            "error": pa.array([errors.get(i) if v is None else None for i, v in items], pa.string()),
        }
    )
    pq.write_table(table, path)


def _read_shard(path: Path) -> Iterator[tuple[str, np.ndarray | None, str | None]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for ident, vec, error in zip(
        table["id"].to_pylist(), table["embedding"].to_pylist(), table["error"].to_pylist(), strict=True
    ):
        yield ident, None if vec is None else np.asarray(vec, dtype=np.float32), error


def embed(
    model: PathLike | None,
    input_file: PathLike,
    output: PathLike,
    *,
    pool: WorkerPool | PoolSpec | None = None,
    pooling: str = "mean",
    layer: int = -1,
    max_tokens: int | None = None,
    chunk_overlap: int | None = None,
    prefix: str = "",
    batch_size: int = 8,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_bad_record: Callable[[BadRecord], None] | None = None,
    fault: FaultPlan | None = None,
) -> EmbedRunResult:
    """``hexamer embed -i INPUT -o OUTPUT`` on Ray actors; the file equals the command's.

    ``pooling`` is ``embed_sequences``'s ``pool``; ``shard_records`` (default 1,024) is the least
    number of records per shard (a shard ends where an embedding group ends). A record the reader
    rejects is kept as a row without a vector (``on_bad_record`` hears of it). ``pool``,
    ``resume``, ``max_attempts`` and ``fault`` are as for :func:`hexamer.distributed.run_vep`."""
    run = ShardRun(Path(output), shard_records, max_attempts, resume, fault, on_note, on_progress)
    out = run.out
    if not out.name.lower().endswith(EMBEDDING_FORMATS):
        raise ValueError(f"embeddings are written as {' or '.join(EMBEDDING_FORMATS)}, got {out.name!r}")
    if pooling not in POOLS:
        raise ValueError(f"pool must be one of {', '.join(POOLS)}, got {pooling!r}")
    check_job(out, {"sequence": input_file})
    size = DEFAULT_SHARD_RECORDS if run.shard_records is None else run.shard_records
    if not 1 <= size <= 10_000_000:
        raise ValueError(f"shard_records must be between 1 and 10,000,000, got {size}")
    options = {
        "pool": pooling,
        "layer": layer,
        "max_tokens": max_tokens,
        "chunk_overlap": chunk_overlap,
        "prefix": prefix,
        "batch_size": batch_size,
    }
    reader_errors: dict[str, str] = {}

    def records() -> Iterator[SequenceRecord]:
        for rec in read_sequences(os.fspath(input_file)):
            if isinstance(rec, BadRecord):  # kept as a row without a vector, as the command does
                ident = rec.id or f"record{rec.index}"
                reader_errors.setdefault(ident, rec.reason)
                if on_bad_record is not None:
                    on_bad_record(rec)
                yield SequenceRecord(id=ident, sequence="", index=rec.index)
            else:
                yield rec

    with pool_for(pool, model, batch_size) as workers_pool:
        import ray

        layout, capacity, overlap = ray.get(workers_pool.actors[0].embed_geometry.remote(options))
        job = {"format": _FORMAT, "settings": options, "input": file_identity(input_file)}
        store = job_store(run, job, workers_pool, size)
        count = lambda rec: prompt_count(rec, layout, capacity, overlap)  # noqa: E731

        done, failed = file_handlers(
            store,
            run,
            _write_shard,
            lambda value: len(value[0]),
            lambda shard, why: ([(r.id, None) for r in shard.records], {r.id: why for r in shard.records}),
            "its records have no vector",
            "embedding",
        )
        feed = drive(
            workers_pool,
            run,
            store,
            group_shards(records(), size, count),
            lambda actor, shard: actor.embed_shard.remote(shard.index, shard.records, options, fault),
            done,
            failed,
        )
    errors = dict(reader_errors)

    def items() -> Iterator[tuple[str, np.ndarray | None]]:
        for index in sorted(store.entries):
            for ident, vec, error in _read_shard(store.path(index)):
                if vec is None and error is not None:
                    errors.setdefault(ident, error)
                yield ident, vec

    n = write_embeddings(out, items(), errors=errors)
    store.remove()
    return EmbedRunResult(output=str(out), n_records=n, errors=errors, n_resumed=feed.n_resumed)
