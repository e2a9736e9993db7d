"""The model fingerprint is written into resume checkpoints, Ray run folders, calibration tables
and eval caches, so its value is pinned: a change would make every existing file refuse its model."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.calibration import Calibration
from hexamer.demo import demo_model_path

#: ``carbon.backend.fingerprint()`` of the shipped demo model (configuration + sampled weights).
DEMO_FINGERPRINT = "4a0f59c331d77737"
#: the same of ``build_carbon_folder``'s default tiny folder (seeded random weights).
TINY_FINGERPRINT = "7de16e51e5a7476d"


@pytest.fixture(scope="module")
def demo() -> Carbon:
    return Carbon.from_pretrained(demo_model_path())


def test_the_demo_models_fingerprint_is_unchanged(demo: Carbon) -> None:
    assert demo.backend.fingerprint() == DEMO_FINGERPRINT
    assert demo.fingerprint() == DEMO_FINGERPRINT  # the front end forwards to its backend


def test_the_tiny_folders_fingerprint_is_unchanged(tiny_folder: Path) -> None:
    assert Carbon.from_pretrained(tiny_folder, dtype="float32").backend.fingerprint() == TINY_FINGERPRINT


def test_a_calibration_table_with_the_pinned_fingerprint_still_matches(demo: Carbon) -> None:
    """A table written before (its ``model`` field holds the pinned value) is checked, not refused."""
    from hexamer.ism import ism_settings

    settings = ism_settings(recipe="next_base", context=600, context_grid=600)
    table = Calibration.from_scores([i / 10 for i in range(12)], model=DEMO_FINGERPRINT, settings=settings)
    table.check(demo, settings)
