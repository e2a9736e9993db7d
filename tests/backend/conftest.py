"""Fixtures: the tiny local model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
