"""``-`` as a file name: standard input spooled to a file, a finished file copied to standard output.

htslib, pyarrow and the resumable writers need real files (they seek, reopen, rename), so a pipe is
copied to a temporary file first, and an output is written to a file and then streamed out.
"""

from __future__ import annotations

import os
import shutil
import sys

__all__ = ["STDIO", "copy_to_stdout", "spool_stdin"]

#: The file name that means standard input or output.
STDIO = "-"


def spool_stdin(path: str | os.PathLike[str]) -> int:
    """Copy all of standard input to ``path``; returns the bytes copied."""
    source = getattr(sys.stdin, "buffer", None)
    with open(path, "wb") as out:
        if source is not None:
            shutil.copyfileobj(source, out, 1 << 20)
        else:  # a text stream without a binary buffer (e.g. io.StringIO in tests)
            for chunk in iter(lambda: sys.stdin.read(1 << 20), ""):
                out.write(chunk.encode("utf-8"))
        return out.tell()


def copy_to_stdout(path: str | os.PathLike[str]) -> None:
    """Stream a finished file to standard output (bytes as they are)."""
    sys.stdout.flush()
    target = getattr(sys.stdout, "buffer", None)
    with open(path, "rb") as f:
        if target is not None:
            shutil.copyfileobj(f, target, 1 << 20)
            target.flush()
        else:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
