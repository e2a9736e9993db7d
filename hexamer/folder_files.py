"""Which files of a model folder may be read: the one rule every reader of a folder applies
(weights, ``config.json``, the tokenizer files), kept free of torch so the tokenizer can use it.

A FIFO or device named like a model file would block a reader forever (or stream a device), and a
symlink out of the folder would read files the folder's owner never meant to ship; both are
refused with an error naming the file. Hugging Face hub-cache links (``snapshots/<rev>/x ->
../../blobs/<hash>``) are followed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["checked_file"]


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
