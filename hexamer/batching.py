"""Fixed-size batches of a stream (``itertools.batched`` arrives only in Python 3.12, with tuples)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["batched"]

T = TypeVar("T")


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` consecutive items (the last one shorter), read lazily from ``items``."""
    if size < 1:
        raise ValueError(f"batch size must be at least 1, got {size}")
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
