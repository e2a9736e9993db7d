"""The progress hook that stops a job part-way raises once the rows reported reach the limit."""

from __future__ import annotations

import pytest

from hexamer.testing.interrupts import Killed, kill_after


def test_kill_after_raises_when_the_rows_reach_the_limit() -> None:
    hook = kill_after(10)
    hook(4)
    hook(5)
    with pytest.raises(Killed):
        hook(1)


def test_kill_after_raises_the_error_given() -> None:
    with pytest.raises(KeyboardInterrupt):
        kill_after(3, KeyboardInterrupt)(7)
