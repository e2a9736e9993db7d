"""What every scale-out driver shares: a pool for the job, the checks before any work, the feed
of shards still to compute (committed ones counted, not sent), the loop that computes them and
checks the store is whole, and what a shard that kept failing becomes."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.scheduler import run_shards
from hexamer.distributed.sharding import Shard
from hexamer.distributed.store import ShardStore, file_identity, run_folder

if TYPE_CHECKING:
    from hexamer.calibration import Calibration
    from hexamer.vep.engine import VepSettings

__all__ = [
    "ShardFeed",
    "block_shards",
    "check_attempts",
    "check_job",
    "drive",
    "engine_row_handlers",
    "failed_rows_handler",
    "failure_reason",
    "note_once",
    "pool_for",
]

T = TypeVar("T")
Row = dict[str, Any]


@contextlib.contextmanager
def pool_for(
    pool: WorkerPool | PoolSpec | None, model: str | os.PathLike[str] | None, batch_size: int
) -> Iterator[WorkerPool]:
    """``pool`` when it is a running :class:`WorkerPool`; else a pool of ``model`` started as the
    :class:`PoolSpec` says (None: ``PoolSpec()``), its actors loading the model with the job's
    ``batch_size``, for this job only (stopped after)."""
    if isinstance(pool, WorkerPool):
        yield pool
        return
    if pool is not None and not isinstance(pool, PoolSpec):
        raise TypeError(f"pool must be a WorkerPool or a PoolSpec, got {type(pool).__name__}")
    if model is None:
        raise ValueError("give a model folder (or a running WorkerPool)")
    with WorkerPool(model, pool, batch_size=batch_size) as own:
        yield own


def sequence_store(
    fmt: str,
    out: os.PathLike[str],
    input_file: str | os.PathLike[str],
    options: dict[str, Any],
    pool: WorkerPool,
    size: int,
    resume: bool,
    note: Callable[[str], None],
) -> ShardStore:
    """The run folder of a job with one output row per input sequence (score, embed): the job is
    its format, options, input file, model, output name and shard size."""
    meta = {
        "format": fmt,
        "settings": options,
        "input": file_identity(input_file),
        "model": pool.fingerprint,
        "output": Path(out).name,
        "shard_records": size,
    }
    return ShardStore(run_folder(out), meta, schema=None, resume=resume, on_note=note)


def check_job(
    output: str | os.PathLike[str], inputs: dict[str, str | os.PathLike[str]], max_attempts: int
) -> None:
    """Fail before any actor starts: an output folder that does not exist, a missing input."""
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"output folder {folder!r} does not exist")
    for what, path in inputs.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{os.fspath(path)}: no such {what} file")
    check_attempts(max_attempts)


def check_attempts(max_attempts: int) -> None:
    """Refuse a number of tries per shard outside 1 to 100."""
    if not 1 <= max_attempts <= 100:
        raise ValueError(f"max_attempts must be between 1 and 100, got {max_attempts}")


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
    from hexamer.distributed.cluster import require_ray
    from hexamer.vep.engine import VepSettings

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


def failure_reason(shard: Shard[Any], reason: str, attempts: int, verb: str = "scoring") -> str:
    """What a row of a shard that kept failing says (its records, the attempts, the last error)."""
    last = shard.first + len(shard.records) - 1
    return f"{verb} failed: shard of records {shard.first}-{last} failed {attempts} times ({reason})"


def note_once(note: Callable[[str], None]) -> Callable[[Iterable[str]], None]:
    """A function that passes each message on to ``note`` the first time it comes (every actor
    repeats the engine's notes for its shards)."""
    noted: set[str] = set()

    def tell(messages: Iterable[str]) -> None:
        for message in messages:
            if message not in noted:
                noted.add(message)
                note(message)

    return tell


def engine_row_handlers(
    store: ShardStore,
    rows_of: Callable[[Shard[T], list[Row]], list[Row]],
    failed_rows_of: Callable[[Shard[T], str], list[Row]],
    note: Callable[[str], None],
    progress: Callable[[int], None],
) -> tuple[Callable[[Shard[T], tuple[list[Row], list[str]]], None], Callable[[Shard[T], str, int], None]]:
    """The ``on_result`` and ``on_failure`` of a job whose actors return the VEP engine's rows and
    notes (``vep``, ``ism``): a shard's ``rows_of(shard, engine_rows)`` are committed (each note
    said once); a shard that kept failing commits ``failed_rows_of(shard, why)`` instead."""
    tell = note_once(note)

    def done(shard: Shard[T], value: tuple[list[Row], list[str]]) -> None:
        engine_rows, notes = value
        tell(notes)
        rows = rows_of(shard, engine_rows)
        store.commit(shard.index, shard.first, len(shard.records), rows)
        progress(len(rows))

    return done, failed_rows_handler(store, failed_rows_of, note, progress)


def failed_rows_handler(
    store: ShardStore,
    rows_for: Callable[[Shard[T], str], list[dict[str, Any]]],
    note: Callable[[str], None],
    progress: Callable[[int], None],
) -> Callable[[Shard[T], str, int], None]:
    """The ``on_failed`` of a job whose store holds rows: the shard's ``rows_for(shard, why)``
    (``failed`` rows with the reason) are committed in its place, so every record still appears."""

    def failed(shard: Shard[T], reason: str, attempts: int) -> None:
        why = failure_reason(shard, reason, attempts)
        note(f"{why}; its rows are marked failed")
        rows = rows_for(shard, why)
        store.commit(shard.index, shard.first, len(shard.records), rows, failed=True)
        progress(len(rows))

    return failed


class ShardFeed(Generic[T]):
    """The shards of an input still to compute. A shard the store holds (resume) is counted in
    ``n_resumed`` and reported to ``on_progress``, not yielded; ``n_records`` is how many records
    the input had, once iterated."""

    def __init__(
        self, shards: Iterable[Shard[T]], store: ShardStore, on_progress: Callable[[int], None] | None
    ) -> None:
        self._shards = shards
        self._store = store
        self._progress = on_progress or (lambda _: None)
        self.n_records = 0
        self.n_resumed = 0

    def __iter__(self) -> Iterator[Shard[T]]:
        for shard in self._shards:
            self.n_records = shard.first + len(shard.records)
            entry = self._store.entries.get(shard.index)
            if entry is not None and (entry.first, entry.n_records) == (shard.first, len(shard.records)):
                self.n_resumed += entry.n_rows
                self._progress(entry.n_rows)
                continue
            yield shard


def drive(
    pool: WorkerPool,
    store: ShardStore,
    shards: Iterable[Shard[T]],
    submit: Callable[[Any, Shard[T]], Any],
    on_result: Callable[[Shard[T], Any], None],
    on_failure: Callable[[Shard[T], str, int], None],
    *,
    max_attempts: int,
    progress: Callable[[int], None],
) -> ShardFeed[T]:
    """Compute on the pool's actors every shard the store does not hold yet
    (:func:`~hexamer.distributed.scheduler.run_shards`), then check that the store covers every
    record of the input; the feed tells how many records there were and how many rows resumed."""
    feed = ShardFeed(shards, store, progress)
    run_shards(pool.actors, feed, submit, on_result, on_failure, max_attempts=max_attempts)
    store.check_complete(feed.n_records)
    return feed
