"""Stop a long job part-way, as a kill would, from its progress hook (resume tests)."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Killed", "kill_after"]


class Killed(Exception):
    """Stands in for SIGKILL: raised from ``on_progress`` after some rows."""


def kill_after(rows: int, error: type[BaseException] = Killed) -> Callable[[int], None]:
    """An ``on_progress`` hook that raises ``error`` once ``rows`` rows (or records) are reported
    done: the job stops there with what it committed, like a killed process."""
    seen = 0

    def on_progress(n: int) -> None:
        nonlocal seen
        seen += n
        if seen >= rows:
            raise error

    return on_progress
