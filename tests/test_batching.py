"""batched: fixed-size lists of a stream, the last one shorter, nothing read ahead."""

from __future__ import annotations

import itertools

import pytest

from hexamer.batching import batched


def test_batches_keep_order_and_the_last_is_shorter() -> None:
    assert list(batched(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batched(range(6), 3)) == [[0, 1, 2], [3, 4, 5]]
    assert list(batched([], 3)) == []


def test_reads_lazily_from_an_endless_stream() -> None:
    assert next(batched(itertools.count(), 2)) == [0, 1]


def test_refuses_a_size_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        list(batched(range(3), 0))
