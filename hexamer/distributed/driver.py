"""What every scale-out driver shares: how a job runs its shards (:class:`ShardRun`), a pool for
the job, the checks before any work, the run folder, the feed of shards still to compute
(committed ones counted, not sent) and the loop that computes them and checks the store is whole."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.scheduler import run_shards
from hexamer.distributed.sharding import Shard
from hexamer.distributed.store import ShardStore, run_folder

if TYPE_CHECKING:
    from hexamer.distributed.faults import FaultPlan

__all__ = [
    "ShardFeed",
    "ShardRun",
    "check_job",
    "drive",
    "failure_reason",
    "file_handlers",
    "job_store",
    "note_once",
    "pool_for",
    "refuse_pool_keywords",
]

T = TypeVar("T")
V = TypeVar("V")
#: most tries of one shard (a typo must not retry a poisoned shard for hours)
MAX_ATTEMPTS = 100


@dataclass(frozen=True)
class ShardRun:
    """How a job runs its shards, whatever it computes: the output (its run folder lies next to
    it), the shard size asked for (None: the pipeline's default), the tries per shard before its
    rows are marked failed, whether to continue a killed run, the faults to inject (drills and
    tests), and where notes and progress (rows done) go."""

    out: Path
    shard_records: int | None = None
    max_attempts: int = 3
    resume: bool = False
    fault: FaultPlan | None = None
    on_note: Callable[[str], None] | None = None
    on_progress: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"max_attempts must be between 1 and {MAX_ATTEMPTS}, got {self.max_attempts}")

    def note(self, message: str) -> None:
        """Pass ``message`` to ``on_note`` (nowhere without one)."""
        if self.on_note is not None:
            self.on_note(message)

    def progress(self, n: int) -> None:
        """Report ``n`` more rows done to ``on_progress`` (nowhere without one)."""
        if self.on_progress is not None:
            self.on_progress(n)


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


def refuse_pool_keywords(keywords: Mapping[str, Any]) -> None:
    """A pool option among a driver's settings keywords (``workers=8``, the older way to call)
    is refused with where it goes now, not reported as an unknown setting."""
    moved = sorted(set(keywords) & {f.name for f in fields(PoolSpec)})
    if moved:
        given = ", ".join(f"{name}={keywords[name]!r}" for name in moved)
        raise TypeError(f"the pool is described by pool=PoolSpec(...): give pool=PoolSpec({given})")


def check_job(output: str | os.PathLike[str], inputs: dict[str, str | os.PathLike[str]]) -> None:
    """Fail before any actor starts: an output folder that does not exist, a missing input."""
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"output folder {folder!r} does not exist")
    for what, path in inputs.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{os.fspath(path)}: no such {what} file")


def job_store(
    run: ShardRun, job: dict[str, Any], pool: WorkerPool, size: int, schema: Any = None
) -> ShardStore:
    """The run folder of ``run.out``: ``job`` (its format, settings and inputs by content) with
    the model's fingerprint, the output's name and the shard size, so a resumed run continues the
    same job only; ``schema`` is the Parquet schema of stores that hold rows (vep, ism)."""
    meta = {**job, "model": pool.fingerprint, "output": run.out.name, "shard_records": size}
    return ShardStore(run_folder(run.out), meta, schema=schema, resume=run.resume, on_note=run.note)


def failure_reason(shard: Shard[Any], reason: str, attempts: int, verb: str = "scoring") -> str:
    """What a row of a shard that kept failing says (its records, the attempts, the last error)."""
    last = shard.first + len(shard.records) - 1
    return f"{verb} failed: shard of records {shard.first}-{last} failed {attempts} times ({reason})"


def file_handlers(
    store: ShardStore,
    run: ShardRun,
    write: Callable[[Path, V], None],
    n_rows: Callable[[V], int],
    failed_value: Callable[[Shard[T], str], V],
    consequence: str,
    verb: str = "scoring",
) -> tuple[Callable[[Shard[T], V], None], Callable[[Shard[T], str, int], None]]:
    """The ``on_result`` and ``on_failure`` of a job that commits each shard's value as one file
    (``score``, ``embed``): ``write(path, value)`` writes it, ``n_rows(value)`` rows are reported
    done. A shard that kept failing commits ``failed_value(shard, why)`` instead, and the note
    says why and ``consequence`` (so every record still appears, with the reason)."""

    def commit(shard: Shard[T], value: V, failed: bool) -> None:
        n = n_rows(value)
        store.commit_file(
            shard.index, shard.first, len(shard.records), n, lambda path: write(path, value), failed=failed
        )
        run.progress(n)

    def failed(shard: Shard[T], reason: str, attempts: int) -> None:
        why = failure_reason(shard, reason, attempts, verb)
        run.note(f"{why}; {consequence}")
        commit(shard, failed_value(shard, why), True)

    return (lambda shard, value: commit(shard, value, False)), failed


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
    run: ShardRun,
    store: ShardStore,
    shards: Iterable[Shard[T]],
    submit: Callable[[Any, Shard[T]], Any],
    on_result: Callable[[Shard[T], Any], None],
    on_failure: Callable[[Shard[T], str, int], None],
) -> ShardFeed[T]:
    """Compute on the pool's actors every shard the store does not hold yet
    (:func:`~hexamer.distributed.scheduler.run_shards`, ``run.max_attempts`` tries each), then
    check that the store covers every record of the input; the feed tells how many records there
    were and how many rows resumed."""
    feed = ShardFeed(shards, store, run.progress)
    run_shards(pool.actors, feed, submit, on_result, on_failure, max_attempts=run.max_attempts)
    store.check_complete(feed.n_records)
    return feed
