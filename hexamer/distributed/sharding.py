"""Cut a record stream into shards: consecutive records that keep their global record index, so
row keys and order are those of a single-process run."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from hexamer.batching import batched

__all__ = ["Shard", "shards_of"]

T = TypeVar("T")


@dataclass
class Shard(Generic[T]):
    """Shard ``index``: records ``first`` to ``first + len(records) - 1`` of the input."""

    index: int
    first: int
    records: list[T]


def shards_of(records: Iterable[T], size: int) -> Iterator[Shard[T]]:
    """``size`` records per shard (the last may be shorter), read lazily."""
    if size < 1:
        raise ValueError(f"shard size must be >= 1 record, got {size}")
    for index, batch in enumerate(batched(records, size)):
        yield Shard(index, index * size, batch)
