"""The rule every reader of a model folder applies (``hexamer.folder_files.checked_file``):
regular files inside the folder are read, FIFOs, devices and symlinks out of it are refused by
name, and the Hugging Face hub cache's ``snapshots/<rev>/x -> ../../blobs/<hash>`` links are followed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hexamer.folder_files import checked_file


def test_regular_files_and_links_inside_the_folder_are_read(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.json").symlink_to("a.json")
    assert checked_file(tmp_path / "a.json", tmp_path) == tmp_path / "a.json"
    assert checked_file(tmp_path / "b.json", tmp_path) == tmp_path / "b.json"


def test_fifos_devices_directories_and_outside_links_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "model"
    root.mkdir()
    os.mkfifo(root / "fifo.json")
    (root / "dir.json").mkdir()
    (root / "dev.json").symlink_to("/dev/zero")
    (tmp_path / "secret.json").write_text("{}")
    (root / "out.json").symlink_to(tmp_path / "secret.json")
    (root / "broken.json").symlink_to("nowhere.json")
    for name in ("fifo.json", "dir.json", "dev.json"):
        with pytest.raises(ValueError, match=rf"{name} is not a regular file"):
            checked_file(root / name, root)
    with pytest.raises(
        ValueError, match=r"out\.json is a symlink to .*secret\.json, outside the model folder"
    ):
        checked_file(root / "out.json", root)
    with pytest.raises(FileNotFoundError, match=r"broken\.json does not exist \(or is a broken symlink\)"):
        checked_file(root / "broken.json", root)


def test_hub_cache_links_to_blobs_are_followed(tmp_path: Path) -> None:
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("{}")
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/abc")
    assert checked_file(snapshot / "config.json", snapshot) == snapshot / "config.json"
    (tmp_path / "other").write_text("{}")
    (snapshot / "x.json").symlink_to(tmp_path / "other")
    with pytest.raises(ValueError, match="outside the model folder"):
        checked_file(snapshot / "x.json", snapshot)
