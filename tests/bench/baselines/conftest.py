"""Fixtures for the baseline tests: the tiny random model loaded by hexamer (the engine side)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
