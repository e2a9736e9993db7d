"""Run a call that must not block (reading a FIFO would, forever) and hand back what it raised."""

from __future__ import annotations

import threading
from collections.abc import Callable


def error_within(
    call: Callable[[], object], seconds: float = 10.0, what: str = "the call"
) -> BaseException | None:
    """``call()`` on a daemon thread: the exception it raised, or None; fails the test (an
    ``AssertionError`` naming ``what``) when it is still running after ``seconds``."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), f"{what} hung"
    return errors[0] if errors else None
