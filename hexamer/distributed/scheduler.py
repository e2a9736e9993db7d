"""Stream shards to a pool of actors: a bounded number in flight, results handled as they
finish, failed shards retried and, after ``max_attempts``, handed to ``on_failure``.

Memory stays bounded: at most ``depth`` shards per actor are in flight (the next one queues on
the actor while the driver handles a result), and the input is read only as slots free up.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from hexamer.distributed.cluster import require_ray

__all__ = ["run_shards"]

S = TypeVar("S")


class _Pending(Generic[S]):
    __slots__ = ("actor", "attempt", "shard")

    def __init__(self, shard: S, actor: Any, attempt: int) -> None:
        self.shard, self.actor, self.attempt = shard, actor, attempt


def run_shards(
    actors: list[Any],
    shards: Iterable[S],
    submit: Callable[[Any, S], Any],
    on_result: Callable[[S, Any], None],
    on_failure: Callable[[S, str, int], None],
    *,
    max_attempts: int = 3,
    depth: int = 2,
) -> None:
    """Run ``submit(actor, shard)`` (an object ref) for every shard; ``on_result(shard, value)``
    as each finishes (in completion order), ``on_failure(shard, reason, attempts)`` for one that
    failed ``max_attempts`` times. An actor that died for good (Ray's restarts used up) leaves
    the pool; when none is left this raises."""
    ray = require_ray()
    from ray.exceptions import RayActorError

    slots: deque[Any] = deque(actor for _ in range(depth) for actor in actors)
    retry: deque[tuple[S, int]] = deque()
    pending: dict[Any, _Pending[S]] = {}
    source = iter(shards)
    exhausted = False
    try:
        while True:
            while slots and (retry or not exhausted):
                if retry:
                    shard, attempt = retry.popleft()
                else:
                    try:
                        shard = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    attempt = 1
                actor = slots.popleft()
                pending[submit(actor, shard)] = _Pending(shard, actor, attempt)
            if not pending:
                if retry or not exhausted:  # every actor died with work left: never a partial output
                    raise RuntimeError("every Ray worker died; the committed shards are kept for --resume")
                return
            ready, _ = ray.wait(list(pending), num_returns=1)
            job = pending.pop(ready[0])
            try:
                value = ray.get(ready[0])
            except RayActorError as exc:  # died beyond its restarts: drop it from the pool
                slots = deque(a for a in slots if a != job.actor)
                _again(job, f"worker died: {exc}", retry, on_failure, max_attempts)
            except Exception as exc:
                slots.append(job.actor)
                cause = getattr(exc, "cause", None) or exc
                _again(job, f"{type(cause).__name__}: {cause}", retry, on_failure, max_attempts)
            else:
                slots.append(job.actor)
                on_result(job.shard, value)
    finally:
        for ref in pending:  # the driver stops (an error, ^C): do not leave work queued on actors
            with contextlib.suppress(Exception):  # already finished or gone
                ray.cancel(ref)


def _again(
    job: _Pending[S],
    reason: str,
    retry: deque[tuple[S, int]],
    on_failure: Callable[[S, str, int], None],
    max_attempts: int,
) -> None:
    if job.attempt < max_attempts:
        retry.append((job.shard, job.attempt + 1))
    else:
        on_failure(job.shard, reason.splitlines()[0] if reason else reason, job.attempt)
