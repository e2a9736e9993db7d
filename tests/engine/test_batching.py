"""padded_chunks: consecutive, bounded by padded tokens and rows, nothing lost or reordered."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hexamer.engine.batching import padded_chunks


@given(
    lengths=st.lists(st.integers(1, 50), max_size=30),
    budget=st.one_of(st.none(), st.integers(1, 200)),
    max_rows=st.one_of(st.none(), st.integers(1, 6)),
)
def test_chunks_are_bounded_and_keep_every_item_in_order(
    lengths: list[int], budget: int | None, max_rows: int | None
) -> None:
    items = list(range(len(lengths)))
    chunks = list(padded_chunks(items, lengths, token_budget=budget, max_rows=max_rows))
    assert [i for c in chunks for i in c] == items
    for i, chunk in enumerate(chunks):
        assert chunk
        padded = len(chunk) * max(lengths[j] for j in chunk)
        if len(chunk) > 1:  # a lone item over the budget still runs
            assert budget is None or padded <= budget
        assert max_rows is None or len(chunk) <= max_rows
        if i + 1 < len(chunks):  # greedy: the next item did not fit
            grown = [*chunk, chunks[i + 1][0]]
            over_budget = budget is not None and len(grown) * max(lengths[j] for j in grown) > budget
            assert over_budget or (max_rows is not None and len(grown) > max_rows)


def test_examples() -> None:
    assert list(padded_chunks("abcd", [3, 3, 3, 3], token_budget=6)) == [["a", "b"], ["c", "d"]]
    assert list(padded_chunks("abc", [1, 10, 1], token_budget=10)) == [["a"], ["b"], ["c"]]
    assert list(padded_chunks("abc", [1, 1, 1], token_budget=None, max_rows=2)) == [["a", "b"], ["c"]]
    assert list(padded_chunks("", [], token_budget=5)) == []


def test_items_of_several_rows_count_every_row() -> None:
    # a VEP site is several windows: 3 + 2 rows fit 5, the next site of 2 does not
    assert list(padded_chunks("abc", [4, 4, 4], token_budget=None, max_rows=5, rows=[3, 2, 2])) == [
        ["a", "b"],
        ["c"],
    ]
    # padded tokens are rows x the longest length of the chunk
    assert list(padded_chunks("abc", [2, 5, 2], token_budget=20, rows=[2, 2, 1])) == [["a", "b"], ["c"]]
    # an item larger than the bounds alone still gets its own chunk
    assert list(padded_chunks("ab", [100, 1], token_budget=10, max_rows=2, rows=[4, 1])) == [["a"], ["b"]]


def test_an_item_never_joins_a_chunk_wider_than_its_room() -> None:
    # "b" (length 1) may be padded to 2 at most: the 5-long "c" starts a new chunk
    assert list(padded_chunks("abc", [2, 1, 5], token_budget=None, max_widths=[9, 2, 9])) == [
        ["a", "b"],
        ["c"],
    ]
    # an item whose room is narrower than a chunk already open starts its own
    assert list(padded_chunks("abc", [4, 1, 1], token_budget=None, max_widths=[9, 3, 9])) == [
        ["a"],
        ["b", "c"],
    ]
    # without max_widths nothing changes
    assert list(padded_chunks("abc", [4, 1, 1], token_budget=None)) == [["a", "b", "c"]]
