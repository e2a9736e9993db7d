"""Write embeddings: Parquet (``id``, ``embedding``, ``error``) or ``.npy`` plus an ids file.

* ``.parquet``: one row per record; ``embedding`` is a ``fixed_size_list<float32>[hidden]`` (null
  for a record that could not be embedded, whose reason is in ``error``). Streamed.
* ``.npy``: a float32 ``(n_records, hidden)`` matrix in input order (a row of NaN for a failed
  record) and ``NAME.ids.txt`` beside it with one id per line, in the same order.

Everything is written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from hexamer.io import TableWriter, atomic_path

__all__ = ["EMBEDDING_FORMATS", "ids_path", "write_embeddings"]

PathLike = str | os.PathLike[str]
EMBEDDING_FORMATS = (".parquet", ".npy")


def ids_path(npy: PathLike) -> Path:
    """The ids file that goes with an ``.npy`` matrix: ``emb.npy`` -> ``emb.ids.txt``."""
    path = Path(npy)
    return path.with_name(path.name[: -len(".npy")] + ".ids.txt") if path.name.endswith(".npy") else path


def write_embeddings(
    path: PathLike,
    items: Iterable[tuple[str, np.ndarray | None]],
    *,
    errors: dict[str, str] | None = None,
    on_item: Callable[[str], None] | None = None,
) -> int:
    """Write ``(id, vector or None)`` items (as :func:`embed_sequences` yields them); returns the count.

    ``errors`` maps an id to the reason it has no vector (``embed_sequences``'s ``on_error`` can fill
    it as items stream). ``on_item(id)`` is called after each item is taken (progress).
    """
    name = os.fspath(path).lower()
    if name.endswith(".parquet"):
        return _write_parquet(path, items, errors if errors is not None else {}, on_item)
    if name.endswith(".npy"):
        return _write_npy(path, items, on_item)
    raise ValueError(f"{os.fspath(path)!r}: embeddings are written as {' or '.join(EMBEDDING_FORMATS)}")


def _write_parquet(
    path: PathLike,
    items: Iterable[tuple[str, np.ndarray | None]],
    errors: dict[str, str],
    on_item: Callable[[str], None] | None,
) -> int:
    import pyarrow as pa

    writer: TableWriter | None = None
    pending: list[tuple[str, np.ndarray | None]] = []
    n = 0

    def flush(dim: int) -> None:
        nonlocal writer, pending
        if writer is None:
            schema = pa.schema(
                [("id", pa.string()), ("embedding", pa.list_(pa.float32(), dim)), ("error", pa.string())]
            )
            writer = TableWriter(path, schema=schema)
        assert writer is not None
        ids = [i for i, _ in pending]
        vectors = [None if v is None else np.asarray(v, np.float32).reshape(-1) for _, v in pending]
        bad = next((i for i, v in zip(ids, vectors, strict=True) if v is not None and v.size != dim), None)
        if bad is not None:
            raise ValueError(f"record {bad!r}: vector size differs from the first vector's {dim}")
        emb = pa.array(vectors, pa.list_(pa.float32(), dim))
        err = pa.array(
            [None if v is not None else errors.get(i, "not embedded") for i, v in pending], pa.string()
        )
        writer.write_batch(pa.table({"id": pa.array(ids, pa.string()), "embedding": emb, "error": err}))
        pending = []

    dim: int | None = None
    try:
        for ident, vec in items:
            if vec is not None and dim is None:
                dim = int(np.asarray(vec).size)
            pending.append((ident, vec))
            n += 1
            if on_item is not None:
                on_item(ident)
            if dim is not None and len(pending) >= 1024:
                flush(dim)
        flush(dim or 0)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    assert writer is not None
    writer.close()
    return n


def _write_npy(
    path: PathLike, items: Iterable[tuple[str, np.ndarray | None]], on_item: Callable[[str], None] | None
) -> int:
    ids: list[str] = []
    vectors: list[np.ndarray | None] = []
    for ident, vec in items:
        if "\n" in ident or "\r" in ident:
            raise ValueError(f"id {ident!r} holds a line break; it cannot go in {ids_path(path).name}")
        ids.append(ident)
        vectors.append(None if vec is None else np.asarray(vec, np.float32).reshape(-1))
        if on_item is not None:
            on_item(ident)
    dim = next((v.size for v in vectors if v is not None), 0)
    matrix = np.full((len(ids), dim), np.nan, dtype=np.float32)
    for i, v in enumerate(vectors):
        if v is not None:
            if v.size != dim:
                raise ValueError(f"record {ids[i]!r}: vector of size {v.size}, expected {dim}")
            matrix[i] = v
    sidecar = ids_path(path)
    with atomic_path(sidecar) as tmp_ids, atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.save(f, matrix)
        tmp_ids.write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
    return len(ids)
