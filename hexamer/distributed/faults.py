"""Deterministic fault injection for drills and tests: kill a worker or poison a shard on purpose."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FaultPlan", "InjectedFault"]


class InjectedFault(RuntimeError):
    """The error a poisoned shard raises."""


@dataclass(frozen=True)
class FaultPlan:
    """``exit_in_shard``: the worker process scoring that shard exits at once (as if killed), the
    first time only when ``once_file`` is given (it is created then); ``raise_in_shard``: that
    shard raises :class:`InjectedFault` on every attempt."""

    exit_in_shard: int | None = None
    raise_in_shard: int | None = None
    once_file: str | None = None

    def apply(self, shard: int) -> None:
        """Called by a worker as it starts a shard."""
        if self.raise_in_shard == shard:
            raise InjectedFault(f"injected fault in shard {shard}")
        if self.exit_in_shard == shard:
            if self.once_file is not None:
                marker = Path(self.once_file)
                if marker.exists():
                    return
                marker.touch()
            os._exit(1)
