"""The ``--ray`` option group of ``vep``, ``ism``, ``score`` and ``embed``: ``--ray``,
``--workers``, ``--shard-records`` and ``--num-gpus-per-worker``, handed to the command as one
:class:`RayRun` (None without ``--ray``). Each command gives its own ``--shard-records`` option: a
shard's unit and default differ (engine blocks of variants, sequences, embeddings). What runs on
Ray is :mod:`hexamer.cli.scaleout`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typer

from hexamer.cli.app import fail
from hexamer.cli.option_groups import option_group
from hexamer.cli.scaleout import GpusPerWorkerOption, RayOption, WorkersOption

if TYPE_CHECKING:
    from hexamer.distributed import PoolSpec

__all__ = ["RayRun", "check_resume", "ray_options"]


@dataclass(frozen=True)
class RayRun:
    """``--ray ADDRESS`` and the scale-out options that go with it."""

    address: str
    workers: int = 2
    shard_records: int | None = None
    num_gpus: float = 0.0

    def pool(self, *, threads: int | None, dtype: str, device: str | None) -> PoolSpec:
        """The actors these options ask for, with the command's ``--threads``, ``--dtype`` and
        ``--device``; a clean exit now, before any work, when Ray is missing or a value is out of range."""
        from hexamer.distributed import PoolSpec, RayUnavailableError, require_ray

        try:
            require_ray()
            return PoolSpec(
                workers=self.workers,
                address=self.address,
                threads=threads or 1,
                num_gpus=self.num_gpus,
                dtype=dtype,
                device=device,
            )
        except (RayUnavailableError, ValueError) as exc:
            fail(exc)


def check_resume(resume: bool, ray: RayRun | None) -> None:
    """``--resume`` continues a ``--ray`` run (one process has no shards to keep)."""
    if resume and ray is None:
        raise typer.BadParameter("--resume continues a --ray run: add --ray", param_hint="'--resume'")


def _ray_run(
    ray: str | None, workers: int, shard_records: int | None, num_gpus_per_worker: float
) -> RayRun | None:
    return None if ray is None else RayRun(ray, workers, shard_records, num_gpus_per_worker)


def ray_options(shard_records: Any) -> Callable[[Any], Any]:
    """A decorator (below ``@app.command()``) that puts the ``--ray`` group, with the command's
    ``shard_records`` option (an ``Annotated`` type), in place of its ``ray`` parameter."""
    return option_group(
        "ray",
        (
            ("ray", RayOption, None),
            ("workers", WorkersOption, 2),
            ("shard_records", shard_records, None),
            ("num_gpus_per_worker", GpusPerWorkerOption, 0.0),
        ),
        _ray_run,
    )
