"""Connecting to Ray, and a pool of model-holding actors (one model load per actor).

Ray is an optional extra: importing this module works without it, and the first use says how to
install it (:class:`RayUnavailableError`).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hexamer.distributed.worker import ShardWorker

__all__ = [
    "DEFAULT_CPUS_PER_THREAD",
    "PoolSpec",
    "RayUnavailableError",
    "WorkerPool",
    "connect",
    "require_ray",
]

#: Ray CPUs an actor reserves per PyTorch thread. Ray's CPU count is a scheduling token, not a
#: limit: reserving half a CPU per thread leaves room on every node for the driver, Ray's own
#: processes and any read/write task, so two single-thread actors on a 2-core machine do not
#: take every CPU token (which deadlocks anything else that needs one).
DEFAULT_CPUS_PER_THREAD = 0.5
#: A killed actor is restarted (the model loaded again) this many times.
MAX_RESTARTS = 4
#: Ray re-runs a task whose actor died this many times (on the restarted actor).
MAX_TASK_RETRIES = 3
#: Largest --workers: a typo (10000) must not ask a cluster for ten thousand model copies.
MAX_WORKERS = 4096


class RayUnavailableError(RuntimeError):
    """Ray is not installed (it is the optional extra ``hexamer[ray]``)."""


def require_ray() -> Any:
    """The ``ray`` module, or a :class:`RayUnavailableError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError("running on Ray needs the ray package: pip install 'hexamer[ray]'") from exc
    return ray


def connect(address: str | None = "auto") -> None:
    """Join a Ray cluster unless this process already has.

    ``"auto"`` (or None): the cluster in ``RAY_ADDRESS``, else the one ``ray start --head`` runs on
    this machine, else a local Ray instance started for this process. ``"local"``: always a new
    local instance. Anything else is a cluster address (``ray://head:10001``, ``head:6379``).
    """
    ray = require_ray()
    if ray.is_initialized():
        return
    local = {"include_dashboard": False, "log_to_driver": False}
    if address in (None, "auto"):
        if os.environ.get("RAY_ADDRESS"):
            ray.init()
            return
        try:
            ray.init(address="auto")
        except ConnectionError:
            ray.init(**local)
        return
    if address == "local":
        ray.init(address="local", **local)
        return
    ray.init(address=address)


def _shortfall(
    resources: dict[str, float], workers: int, cpus: float, gpus: float
) -> tuple[str, float, float] | None:
    """The first resource ``workers`` actors of ``cpus`` CPUs and ``gpus`` GPUs each would lack in
    ``resources``, as (name, needed, there), or None when they fit."""
    for name, each in (("CPU", cpus), ("GPU", gpus)):
        have = float(resources.get(name, 0.0))
        if each > 0 and workers * each > have + 1e-9:
            return name, workers * each, have
    return None


def _check_fits(resources: dict[str, float], workers: int, cpus: float, gpus: float) -> None:
    """Refuse a pool the cluster can never place (Ray would wait for it forever)."""
    short = _shortfall(resources, workers, cpus, gpus)
    if short is not None:
        name, need, have = short
        each = cpus if name == "CPU" else gpus
        raise ValueError(
            f"{workers} workers x {each:g} {name}s each need {need:g} {name}s; the Ray "
            f"cluster has {have:g}: use fewer workers, or fewer {name}s per worker"
        )


#: how long a new pool waits for CPUs/GPUs that other Ray jobs hold (actors of a pool just closed
#: take a moment to release theirs) before it is refused instead of waiting forever
ROOM_WAIT_SECONDS = 15.0


def _wait_for_room(ray: Any, workers: int, cpus: float, gpus: float) -> None:
    """Refuse a pool that fits the cluster but not what is free now: Ray would queue its actors
    until another job ends, which looks like a hang."""
    deadline = time.monotonic() + ROOM_WAIT_SECONDS
    while True:
        short = _shortfall(ray.available_resources(), workers, cpus, gpus)
        if short is None:
            return
        if time.monotonic() >= deadline:
            name, need, have = short
            raise ValueError(
                f"{workers} workers need {need:g} {name}s but only {have:g} are free on the Ray cluster "
                f"(other Ray jobs or pools hold the rest; waited {ROOM_WAIT_SECONDS:g} s): close the other "
                "pool, wait for the other job, or use fewer workers"
            )
        time.sleep(0.5)


def _absolute(model: str) -> str:
    """A local model folder as an absolute path (actors may run in another working folder); a hub
    id as given."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


@dataclass(frozen=True)
class PoolSpec:
    """Where a :class:`WorkerPool` runs and what each of its actors holds, checked when built.

    workers: model-holding actors (1 to :data:`MAX_WORKERS`).
    address: the Ray cluster, as for :func:`connect` (``"auto"``, ``"local"``, ``ray://head:10001``).
    threads: PyTorch threads per actor (1 to 1,024).
    num_cpus: Ray CPUs each actor reserves (None: :data:`DEFAULT_CPUS_PER_THREAD` per thread).
    num_gpus: GPUs each actor reserves (1 for one GPU per actor; fractions share one; 0 to 64).
    dtype, device: how each actor loads the model (as ``Carbon.from_pretrained``; None: its default).
    """

    workers: int = 2
    address: str | None = "auto"
    threads: int = 1
    num_cpus: float | None = None
    num_gpus: float = 0.0
    dtype: str = "auto"
    device: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.threads <= 1024:
            raise ValueError(f"threads must be between 1 and 1024, got {self.threads}")
        if self.num_cpus is not None and not 0 < self.num_cpus <= 1024:
            raise ValueError(f"num_cpus must be above 0 and at most 1024, got {self.num_cpus}")
        if not 0 <= self.num_gpus <= 64:
            raise ValueError(f"num_gpus must be between 0 and 64, got {self.num_gpus}")

    @property
    def cpus_per_worker(self) -> float:
        """The Ray CPUs each actor reserves."""
        return self.num_cpus if self.num_cpus is not None else DEFAULT_CPUS_PER_THREAD * self.threads


class WorkerPool:
    """``spec.workers`` Ray actors (:class:`PoolSpec`, default ``PoolSpec()``), each holding one
    copy of the model for the whole job (or several), loaded with ``max_batch_size=batch_size``.

    A killed actor is restarted and its tasks re-run. Every actor must load the same model
    (compared by fingerprint): a model folder that differs between nodes is refused, not mixed
    into one output. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self, model: str | os.PathLike[str], spec: PoolSpec | None = None, *, batch_size: int = 8
    ) -> None:
        spec = spec or PoolSpec()
        ray = require_ray()
        connect(spec.address)
        self.model = _absolute(os.fspath(model))
        self.spec = spec
        self.batch_size = batch_size
        cpus, gpus = spec.cpus_per_worker, spec.num_gpus
        _check_fits(ray.cluster_resources(), spec.workers, cpus, gpus)
        _wait_for_room(ray, spec.workers, cpus, gpus)
        actor = ray.remote(ShardWorker).options(
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES,
        )
        self.actors: list[Any] = [
            actor.remote(
                self.model, dtype=spec.dtype, device=spec.device, threads=spec.threads, batch_size=batch_size
            )
            for _ in range(spec.workers)
        ]
        self._owner = True
        try:
            infos = ray.get([a.describe.remote() for a in self.actors])
        except Exception as exc:
            self.close()
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            why = lines[-1] if lines else repr(exc)  # the worker's own error, not Ray's traceback
            raise ValueError(f"the Ray workers could not load the model {self.model!r}: {why}") from exc
        prints = {info["fingerprint"] for info in infos}
        if len(prints) != 1:
            self.close()
            where = ", ".join(f"{i['host']}: {i['fingerprint']}" for i in infos)
            raise ValueError(
                f"the workers loaded different models from {self.model!r} ({where}); put the model "
                "folder on storage every node shares"
            )
        self.fingerprint: str = infos[0]["fingerprint"]
        self.infos: list[dict[str, Any]] = infos

    def cpu_seconds(self) -> float:
        """CPU time the actors have used so far, summed (user + system)."""
        ray = require_ray()
        return float(sum(ray.get([a.cpu_seconds.remote() for a in self.actors])))

    def limited(self, workers: int) -> WorkerPool:
        """A view of the first ``workers`` actors (closing it leaves them running)."""
        if not 1 <= workers <= len(self.actors):
            raise ValueError(f"workers must be between 1 and {len(self.actors)}, got {workers}")
        view = object.__new__(WorkerPool)
        view.__dict__.update(self.__dict__)
        view.spec = replace(self.spec, workers=workers)
        view.actors = self.actors[:workers]
        view.infos = self.infos[:workers]
        view._owner = False
        return view

    def close(self) -> None:
        """Stop the actors (their models are freed)."""
        if not self._owner or not self.actors:
            return
        ray = require_ray()
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor, no_restart=True)
        self.actors = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
