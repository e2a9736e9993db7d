"""Shared pieces: the tiny model's backend and a constraint set written for the tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.carbon import Carbon


class GcAndNoRun:
    """Test constraints, checked on whole sequences: GC fraction at most ``max_gc`` and no run of
    ``run + 1`` equal bases. ``allows_edit`` answers by checking the edited sequence."""

    def __init__(self, max_gc: float = 0.5, run: int = 3) -> None:
        self.max_gc = max_gc
        self.run = run
        self.asked = 0

    def satisfied(self, seq: str) -> bool:
        gc = sum(b in "GC" for b in seq) / len(seq)
        return gc <= self.max_gc and not any(b * (self.run + 1) in seq for b in "ACGT")

    def allows_edit(self, seq: str, pos: int, base: str) -> bool:
        self.asked += 1
        return self.satisfied(seq[:pos] + base + seq[pos + 1 :])


@pytest.fixture(scope="module")
def tiny_carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
