"""Jobs the actors score with the VEP engine in whole engine blocks (``vep`` and ``ism``): the
settings as the actors' model fits them, shards that are whole blocks (so each plans the work
units one process plans), and shards committed as rows, a shard that kept failing as ``failed``
rows with the reason."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from hexamer.distributed.cluster import WorkerPool, require_ray
from hexamer.distributed.driver import ShardFeed, ShardRun, drive, failure_reason, job_store, note_once
from hexamer.distributed.sharding import Shard
from hexamer.distributed.store import ShardStore
from hexamer.vep.rows import result_row
from hexamer.vep.settings import VepSettings

if TYPE_CHECKING:
    from hexamer.calibration.table import Calibration
    from hexamer.io.vcf.records import VcfRecord

__all__ = ["block_shards", "score_blocks"]

T = TypeVar("T")
Row = dict[str, Any]


def block_shards(
    pool: WorkerPool,
    requested: VepSettings,
    shard_records: int | None,
    note: Callable[[str], None],
    calibration: Calibration | None = None,
) -> tuple[VepSettings, int]:
    """The VEP settings as the actors' model fits them (what was cut goes to ``note``), checked
    against ``calibration`` before any shard is scored, and the shard size: ``shard_records``
    (default ``block_records``), a positive multiple of ``block_records`` so each shard plans the
    engine blocks a single-process run plans."""
    ray = require_ray()
    checked_dict, fitted = ray.get(pool.actors[0].vep_settings.remote(requested.as_dict()))
    for message in fitted:
        note(message)
    checked = VepSettings(**checked_dict)
    if calibration is not None:
        calibration.check(pool.fingerprint, checked)
    size = checked.block_records if shard_records is None else shard_records
    if size < 1 or size % checked.block_records:
        raise ValueError(
            f"shard_records must be a positive multiple of block_records ({checked.block_records}) so "
            f"each shard plans the engine blocks a single-process run plans, got {size}"
        )
    return checked, size


def _records(shard: Shard[Any]) -> Sequence[VcfRecord]:
    return shard.records


def _rows(shard: Shard[Any], engine_rows: list[Row], recipe: str) -> list[Row]:
    return engine_rows


def score_blocks(
    pool: WorkerPool,
    run: ShardRun,
    requested: VepSettings,
    calibration: Calibration | None,
    job: dict[str, Any],
    schema: Any,
    shards: Callable[[int], Iterable[Shard[T]]],
    fasta: str,
    renames: Mapping[str, str] | None = None,
    *,
    records_of: Callable[[Shard[T]], Sequence[VcfRecord]] = _records,
    rows_of: Callable[[Shard[T], list[Row], str], list[Row]] = _rows,
) -> tuple[VepSettings, ShardStore, ShardFeed[T]]:
    """Score every shard of ``shards(size)`` not committed yet: the actors score a shard's
    ``records_of(shard)`` (default: all of them) against ``fasta`` with the settings they fit, and
    ``rows_of(shard, engine_rows, recipe)`` (default: the engine rows) are committed. A shard that
    kept failing commits ``rows_of`` of ``failed`` rows for its records instead, so every record
    still appears. ``job`` and ``schema`` describe the run folder (:func:`job_store`). Returns the
    settings used, the store (every record's rows) and the feed (records read, rows resumed)."""
    checked, size = block_shards(pool, requested, run.shard_records, run.note, calibration)
    settings = checked.as_dict()
    store = job_store(run, {**job, "settings": settings}, pool, size, schema)
    tell = note_once(run.note)

    def submit(actor: Any, shard: Shard[T]) -> Any:
        return actor.vep_shard.remote(shard.index, records_of(shard), fasta, renames, settings, run.fault)

    def commit(shard: Shard[T], rows: list[Row], failed: bool) -> None:
        store.commit(shard.index, shard.first, len(shard.records), rows, failed=failed)
        run.progress(len(rows))

    def done(shard: Shard[T], value: tuple[list[Row], list[str]]) -> None:
        engine_rows, notes = value
        tell(notes)
        commit(shard, rows_of(shard, engine_rows, checked.recipe), False)

    def failed(shard: Shard[T], reason: str, attempts: int) -> None:
        why = failure_reason(shard, reason, attempts)
        run.note(f"{why}; its rows are marked failed")
        records = records_of(shard)
        rows = [
            result_row(v, checked.recipe, "failed", reason=why) for rec in records for v in rec.variants()
        ]
        commit(shard, rows_of(shard, rows, checked.recipe), True)

    return checked, store, drive(pool, run, store, shards(size), submit, done, failed)
