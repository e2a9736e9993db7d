"""Digit tables, index conversions and the ACGT reordering."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hexamer.fns import (
    bases_to_kmer,
    digits_of,
    from_acgt,
    kmer_digits,
    kmer_index,
    kmer_to_bases,
    n_kmers,
    onehot_map,
    to_acgt,
)
from hexamer.fns.tables import infer_k
from tests.fns.fns_reference import kmers

# Worked ids from the tokenizer spec (index = id - 151672).
WORKED = {
    "AAAAAA": 0,
    "ATCGAA": 432,
    "ATCGAT": 433,
    "TTTTTT": 1365,
    "CGAAAA": 2816,
    "CCCCCC": 2730,
    "CGATCG": 2843,
    "CGTACG": 2891,
    "GGGGGG": 4095,
}


@pytest.mark.parametrize(("kmer", "index"), WORKED.items())
def test_worked_indices(kmer: str, index: int) -> None:
    assert bases_to_kmer(kmer) == index
    assert bases_to_kmer(kmer.lower()) == index
    assert kmer_to_bases(index) == kmer


@pytest.mark.parametrize("k", [1, 2, 3, 6])
def test_digit_table_matches_product_order(k: int) -> None:
    table = kmer_digits(k)
    assert table.shape == (4**k, k)
    for f, s in enumerate(kmers(k)):
        assert table[f].tolist() == ["ATCG".index(c) for c in s]
        assert kmer_to_bases(f, k) == s
        assert bases_to_kmer(s) == f


@pytest.mark.parametrize("k", [1, 3, 6])
def test_onehot_map(k: int) -> None:
    m = onehot_map(k)
    assert m.shape == (4**k, k, 4) and m.dtype == torch.float32
    assert torch.equal(m.argmax(-1), kmer_digits(k))
    assert torch.all(m.sum(-1) == 1)
    # cached per (k, dtype, device); a different dtype is a different tensor
    assert onehot_map(k) is m
    assert onehot_map(k, torch.float64).dtype == torch.float64
    assert onehot_map(k, torch.float64) is not m


def test_onehot_map_columns_count() -> None:
    # each (position, base) column covers exactly 4**(k-1) k-mers
    assert torch.all(onehot_map(6).sum(0) == 1024)


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 8), data=st.data())
def test_index_digits_roundtrip(k: int, data: st.DataObject) -> None:
    idx = data.draw(st.lists(st.integers(0, 4**k - 1), min_size=1, max_size=20))
    t = torch.tensor(idx)
    d = digits_of(t, k)
    assert d.shape == (len(idx), k)
    assert torch.equal(kmer_index(d), t)
    assert torch.equal(bases_to_kmer(d), t)
    assert [bases_to_kmer(kmer_to_bases(i, k)) for i in idx] == idx


def test_batched_shapes() -> None:
    t = torch.arange(24).reshape(2, 3, 4)
    assert digits_of(t).shape == (2, 3, 4, 6)
    assert torch.equal(kmer_index(digits_of(t)), t)


def test_invalid_inputs() -> None:
    with pytest.raises(ValueError):
        digits_of(torch.tensor([4096]))
    with pytest.raises(ValueError):
        digits_of(torch.tensor([-1]))
    with pytest.raises(TypeError):
        digits_of(torch.tensor([1.0]))
    with pytest.raises(ValueError):
        kmer_index(torch.tensor([0, 4]))
    with pytest.raises(ValueError):
        bases_to_kmer("ATCGAN")
    with pytest.raises(ValueError):
        kmer_to_bases(4096)
    with pytest.raises(ValueError):
        n_kmers(0)
    with pytest.raises(ValueError):
        to_acgt(torch.zeros(3))


def test_infer_k() -> None:
    assert [infer_k(4**k) for k in range(1, 9)] == list(range(1, 9))
    for bad in (1, 2, 8, 4095, 4097, 12288):
        with pytest.raises(ValueError):
            infer_k(bad)


def test_acgt_reordering() -> None:
    atcg = torch.tensor([[10.0, 11.0, 12.0, 13.0]])  # A, T, C, G
    acgt = to_acgt(atcg)
    assert acgt.tolist() == [[10.0, 12.0, 13.0, 11.0]]  # A, C, G, T
    assert torch.equal(from_acgt(acgt), atcg)
    x = torch.randn(2, 6, 4)
    assert torch.equal(from_acgt(to_acgt(x)), x)
    mask = torch.tensor([True, False, False, True])  # user says: A and T allowed (ACGT order)
    assert from_acgt(mask).tolist() == [True, True, False, False]  # A, T in ATCG order
