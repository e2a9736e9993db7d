"""Cutting rows of different lengths into padded forwards of bounded size: the one packer of the
engine's prefill chunks, the local backend's batches and the VEP job's work units."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def padded_chunks(
    items: Sequence[T],
    lengths: Sequence[int],
    *,
    token_budget: int | None,
    max_rows: int | None = None,
    rows: Sequence[int] | None = None,
    max_widths: Sequence[int] | None = None,
) -> Iterator[list[T]]:
    """Consecutive runs of ``items`` whose padded size (rows x longest length) stays within
    ``token_budget`` and whose row count stays within ``max_rows`` (``None``: no bound). An item
    is one row, or ``rows[i]`` rows of length ``lengths[i]`` (a VEP site: its ref and alt
    windows). ``max_widths[i]``: the widest padded forward item ``i`` may join (its padding takes
    cache slots: a row with a cached prefix, or one that will generate many tokens, has fewer to
    spare). An item larger than the bounds on its own still gets a chunk of its own."""
    counts = rows if rows is not None else [1] * len(items)
    limits = max_widths if max_widths is not None else [max(lengths, default=0)] * len(items)
    chunk: list[T] = []
    width = room = n_rows = 0
    for item, n, r, cap in zip(items, lengths, counts, limits, strict=True):
        w = max(width, n)
        spare = min(room, cap) if chunk else cap
        fits = (
            (max_rows is None or n_rows + r <= max_rows)
            and (token_budget is None or (n_rows + r) * w <= token_budget)
            and w <= spare
        )
        if chunk and not fits:
            yield chunk
            chunk, w, n_rows, spare = [], n, 0, cap
        chunk.append(item)
        width, room = w, spare
        n_rows += r
    if chunk:
        yield chunk
