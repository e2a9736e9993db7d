"""A seal on a head folder's hard-linked backbone files: a head never runs on weights it was not fit on.

A probe's head folder holds its frozen backbone as hard links to the base model's weight files
(:mod:`hexamer.finetune.best_folder`): no bytes copied, but one file under two names. Anything that
rewrites the base file in place (``cp`` over it, ``save_pretrained`` or ``save_file`` into the
same folder) then changes the head's backbone too, and the head's ``score`` — fit on the old
features — would go on predicting, silently wrong. The seal, ``backbone_seal.json``, records each
linked file's size, modification time and SHA-256 when the head is written; reading the folder
checks it: an unchanged size and time are taken as unchanged (a stat, no read), anything else is
hashed again and must match. Tools that replace files (write a new one, rename it over) leave the
head's link on the old bytes and the seal holds. ``transformers`` does not read the seal.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["SEAL", "check_backbone_seal", "file_seal", "write_backbone_seal"]

SEAL = "backbone_seal.json"
_CHUNK = 1 << 20


def file_seal(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Size, modification time (ns) and SHA-256 of one file."""
    st = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest.hexdigest()}


def write_backbone_seal(folder: Path, seals: dict[str, dict[str, Any]]) -> None:
    """Write ``folder/backbone_seal.json`` for its files named in ``seals`` (name -> file_seal)."""
    body = {"about": "hexamer: the backbone files this head was fit on", "files": seals}
    (folder / SEAL).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def check_backbone_seal(folder: str | os.PathLike[str]) -> None:
    """Raise ValueError when a sealed backbone file of ``folder`` is missing or changed (no seal:
    nothing to check, e.g. a head folder written in full or by ``transformers``)."""
    folder = Path(folder)
    path = folder / SEAL
    if not path.is_file():
        return
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        items = [(str(n), int(s["size"]), int(s["mtime_ns"]), str(s["sha256"])) for n, s in files.items()]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a backbone seal this version reads ({exc})") from None
    for name, size, mtime_ns, sha in items:
        file = folder / name
        if Path(name).name != name or not file.is_file():
            raise ValueError(f"{path}: sealed backbone file {name!r} is missing from {folder}")
        st = os.stat(file)
        if st.st_size == size and st.st_mtime_ns == mtime_ns:
            continue
        if st.st_size != size or file_seal(file)["sha256"] != sha:
            raise ValueError(
                f"{file}: the frozen backbone changed after this head was fit (it does not match "
                f"{SEAL}). It is a hard link to the base model's weights, which were rewritten in "
                "place; the head's score was fit on the old weights. Restore the base model's "
                "original file or fit the head again."
            )
