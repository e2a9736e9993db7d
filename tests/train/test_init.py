"""Where a training run starts: a model folder's config.json is read with the model-loading checks."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from hexamer.testing.hangs import error_within
from hexamer.train.init import starting_point


def test_fine_tuning_from_a_folder_with_a_fifo_config_fails_by_name(
    tiny_folder: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(tiny_folder, folder)
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    error = error_within(lambda: starting_point(str(folder)), what="starting a run from a FIFO config.json")
    assert isinstance(error, ValueError) and "config.json is not a regular file" in str(error)


def test_fine_tuning_from_a_folder_keeps_its_config(tiny_folder: Path) -> None:
    start = starting_point(str(tiny_folder))
    assert start.hf_config["vocab_size"] == start.model.config.vocab_size
