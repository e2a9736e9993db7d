"""A committed shard of a job that writes rows chunk by chunk (``score``, ``generate``): one JSON
line per chunk of records, its rows with numpy arrays kept with their dtype (lossless, and no
pickle), so the merge replays each chunk as the single-process command wrote it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["read_chunk_lines", "write_chunk_lines"]


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"ndarray": value.dtype.str, "data": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"ndarray", "data"}:
        return np.asarray(value["data"], dtype=np.dtype(value["ndarray"]))
    return value


def write_chunk_lines(path: Path, chunks: Iterable[dict[str, Any]]) -> None:
    """Each chunk (a ``rows`` list of dicts, and any other JSON values) as one line of ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        for chunk in chunks:
            rows = [{k: _encode(v) for k, v in row.items()} for row in chunk["rows"]]
            f.write(json.dumps({**chunk, "rows": rows}) + "\n")


def read_chunk_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The chunks :func:`write_chunk_lines` wrote, in order, arrays restored."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            chunk = json.loads(line)
            chunk["rows"] = [{k: _decode(v) for k, v in row.items()} for row in chunk["rows"]]
            yield chunk
