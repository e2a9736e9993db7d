"""``hexamer score`` on a Ray cluster, with the table a single-process run writes, byte for byte.

Shards are whole multiples of the command's chunk of records
(:data:`~hexamer.sequence_scores.SCORE_CHUNK`), so every engine call sees the records a single
process gives it. A committed shard keeps each chunk's rows as one JSON line, numpy arrays with
their dtype (lossless, and no pickle), and the merge replays the chunks in input order into one
:class:`~hexamer.io.TableWriter`, the writer and batches of the single-process command.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.distributed.chunk_lines import read_chunk_lines, write_chunk_lines
from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.driver import ShardRun, check_job, drive, file_handlers, job_store, pool_for
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.sharding import shards_of
from hexamer.distributed.store import file_identity
from hexamer.io import TableWriter, read_sequences, table_format
from hexamer.sequence_scores import SCORE_CHUNK, blank_row

__all__ = ["ScoreRunResult", "score"]

PathLike = str | os.PathLike[str]
Row = dict[str, Any]
_FORMAT = "hexamer-ray-score/1"
#: default records per shard: 16 chunks
DEFAULT_SHARD_RECORDS = 16 * SCORE_CHUNK


@dataclass
class ScoreRunResult:
    """A finished job: rows per status, the problems met (bad or unscorable records), bases scored."""

    output: str
    n_records: int
    status_counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    scored_bp: int = 0
    n_resumed: int = 0


def _write_chunks(path: Path, chunks: list[tuple[list[Row], list[str], int]]) -> None:
    """A shard's chunks, one JSON line each."""
    write_chunk_lines(
        path, ({"rows": rows, "problems": problems, "scored_bp": bp} for rows, problems, bp in chunks)
    )


def _read_chunks(path: Path) -> Iterator[tuple[list[Row], list[str], int]]:
    for chunk in read_chunk_lines(path):
        yield chunk["rows"], chunk["problems"], chunk["scored_bp"]


def _failed_chunks(
    records: Sequence[Any], reason: str, per_base: bool
) -> list[tuple[list[Row], list[str], int]]:
    """Rows with status ``failed`` for a shard that kept failing (every record still appears)."""
    out = []
    for at in range(0, len(records), SCORE_CHUNK):
        rows = [blank_row(rec.id, "failed", reason, per_base) for rec in records[at : at + SCORE_CHUNK]]
        out.append((rows, [], 0))
    return out


def score(
    model: PathLike | None,
    input_file: PathLike,
    output: PathLike,
    *,
    pool: WorkerPool | PoolSpec | None = None,
    level: str = "bp",
    method: str = "fns",
    prefix: str = "",
    per_base: bool = False,
    batch_size: int = 16,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    fault: FaultPlan | None = None,
) -> ScoreRunResult:
    """``hexamer score -i INPUT -o OUTPUT`` on Ray actors; the table equals the command's.

    ``shard_records`` (default 4,096) must be a multiple of 256 (the command's chunk). ``pool``,
    ``resume``, ``max_attempts`` and ``fault`` are as for :func:`hexamer.distributed.run_vep`;
    ``level``, ``method``, ``prefix``, ``per_base`` and ``batch_size`` as for ``hexamer score``."""
    run = ShardRun(Path(output), shard_records, max_attempts, resume, fault, on_note, on_progress)
    out = run.out
    table_format(out)  # an unsupported extension fails now
    if out.name.lower().endswith((".fa", ".fasta", ".fna", ".fa.gz", ".fasta.gz")):
        raise ValueError("scores are a table: use .tsv, .csv, .jsonl or .parquet")
    check_job(out, {"sequence": input_file})
    size = DEFAULT_SHARD_RECORDS if run.shard_records is None else run.shard_records
    if size < 1 or size % SCORE_CHUNK:
        raise ValueError(
            f"shard_records must be a positive multiple of {SCORE_CHUNK} (the records of one engine "
            f"call in hexamer score), got {size}"
        )
    options = {
        "level": level,
        "method": method,
        "prefix": prefix,
        "per_base": per_base,
        "batch_size": batch_size,
    }
    with pool_for(pool, model, batch_size) as workers_pool:
        job = {"format": _FORMAT, "settings": options, "input": file_identity(input_file)}
        store = job_store(run, job, workers_pool, size)

        done, failed = file_handlers(
            store,
            run,
            _write_chunks,
            lambda chunks: sum(len(rows) for rows, _, _ in chunks),
            lambda shard, why: _failed_chunks(shard.records, why, per_base),
            "its rows are marked failed",
        )
        feed = drive(
            workers_pool,
            run,
            store,
            shards_of(read_sequences(os.fspath(input_file)), size),
            lambda actor, shard: actor.score_shard.remote(shard.index, shard.records, options, fault),
            done,
            failed,
        )
    statuses: Counter[str] = Counter()
    problems: list[str] = []
    scored_bp = 0
    with TableWriter(out) as writer:
        for index in sorted(store.entries):
            for rows, chunk_problems, bp in _read_chunks(store.path(index)):
                writer.write_batch(rows)
                statuses.update(str(r["status"]) for r in rows)
                problems.extend(chunk_problems)
                scored_bp += bp
    store.remove()
    return ScoreRunResult(
        output=str(out),
        n_records=sum(statuses.values()),
        status_counts=dict(statuses),
        problems=problems,
        scored_bp=scored_bp,
        n_resumed=feed.n_resumed,
    )
