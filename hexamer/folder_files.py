"""Which files of a model folder may be read: the one rule every reader of a folder applies
(weights, ``config.json``, the tokenizer files), kept free of torch so the tokenizer can use it.

A FIFO or device named like a model file would block a reader forever (or stream a device), and a
symlink out of the folder would read files the folder's owner never meant to ship; both are
refused with an error naming the file. Hugging Face hub-cache links (``snapshots/<rev>/x ->
../../blobs/<hash>``) are followed.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["checked_file", "read_json_object"]


def checked_file(path: Path, root: Path) -> Path:
    """``path`` if it is a regular file that may be read as part of the model folder ``root``.

    Checked with ``os.stat`` before anything opens it, so a FIFO or device never blocks a load.
    A symlink must resolve inside ``root`` (or, for a hub-cache snapshot, inside the cached
    repository that holds ``root``'s ``blobs/``). Raises ``FileNotFoundError`` (absent or a broken
    symlink) or ``ValueError``, both naming ``path``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist (or is a broken symlink)") from None
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file (a FIFO, device or directory is never read)")
    if path.is_symlink() or any(p.is_symlink() for p in path.parents if root in p.parents):
        target = path.resolve()
        allowed = [root.resolve()]
        if root.parent.name == "snapshots":  # huggingface_hub layout: snapshots/<rev>/x -> ../../blobs/<hash>
            allowed.append(root.parent.parent.resolve() / "blobs")
        if not any(target == a or a in target.parents for a in allowed):
            raise ValueError(f"{path} is a symlink to {target}, outside the model folder {root}")
    return path


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in the folder file ``path`` (already passed :func:`checked_file`); a
    ``ValueError`` naming the file when it is not UTF-8 JSON or holds something else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(data).__name__}")
    return data
