"""Cutting rows of different lengths into padded forwards of bounded size."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def padded_chunks(
    items: Sequence[T], lengths: Sequence[int], *, token_budget: int | None, max_rows: int | None = None
) -> Iterator[list[T]]:
    """Consecutive runs of ``items`` whose padded size (rows x longest length) stays within
    ``token_budget`` and whose row count stays within ``max_rows`` (``None``: no bound). An item
    longer than the budget on its own still gets a chunk of its own."""
    chunk: list[T] = []
    width = 0
    for item, n in zip(items, lengths, strict=True):
        w = max(width, n)
        fits = (max_rows is None or len(chunk) < max_rows) and (
            token_budget is None or (len(chunk) + 1) * w <= token_budget
        )
        if chunk and not fits:
            yield chunk
            chunk, w = [], n
        chunk.append(item)
        width = w
    if chunk:
        yield chunk
