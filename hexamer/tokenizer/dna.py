"""Vectorised k-mer codec: DNA text to k-mer ids and back without a Python loop per base.

This is the hot path of every pipeline (a 24 kb VEP context is 4,000 tokens; a genome is millions),
so it works on bytes with numpy lookup tables. The rules are the official Carbon tokenizer's:
upper-case, non-overlapping k-mers from the left, a chunk with any character outside ACGT becomes
``<oov>``, a short tail is right-padded with ``A``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from hexamer.tokenizer.layout import BASES, DnaLayout


@lru_cache(maxsize=8)
def _digit_table(k: int) -> tuple[np.ndarray, int]:
    """Byte -> base digit (A=0, T=1, C=2, G=3; lower case too); any other byte -> a value that
    pushes the packed k-mer index past 4**k, which marks the chunk as ``<oov>``."""
    invalid = 4**k
    dtype = np.int32 if k <= 8 else np.int64
    table = np.full(256, invalid, dtype=dtype)
    for digit, base in enumerate(BASES):
        table[ord(base)] = digit
        table[ord(base.lower())] = digit
    return table, invalid


@lru_cache(maxsize=8)
def _letter_table(k: int) -> np.ndarray:
    """(4**k, k) ASCII letters of every k-mer in vocabulary order."""
    index = np.arange(4**k, dtype=np.int64)
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)
    shifts = 2 * np.arange(k - 1, -1, -1, dtype=np.int64)
    digits = (index[:, None] >> shifts[None, :]) & 3
    return np.ascontiguousarray(letters[digits])


def _as_bytes(content: str | bytes) -> bytes:
    """ASCII bytes of DNA content; non-ASCII text is upper-cased the Unicode way first (it can change
    length, e.g. 'ß' -> 'SS') and every remaining non-ASCII character becomes an invalid byte."""
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content)
    if content.isascii():
        return content.encode("ascii")
    return content.upper().encode("ascii", errors="replace")


@dataclass(frozen=True)
class DnaEncoding:
    """k-mer ids of one DNA content string plus how many real bases each token holds."""

    ids: np.ndarray  # int64, one per token
    n_real: np.ndarray  # int8: 6 for a full k-mer, r (1..5) for the padded tail, 0 for <oov>
    n_bases: int  # characters of content after upper-casing (the base count, pads excluded)

    k: int = 6

    @property
    def pad_bases(self) -> int:
        """How many ``A`` were appended to complete the last token."""
        return (-self.n_bases) % self.k

    @property
    def n_oov_bases(self) -> int:
        """Bases lost in ``<oov>`` chunks (a chunk holding any non-ACGT character)."""
        return oov_bases(self.n_real, self.n_bases, self.k)


def oov_bases(n_real: np.ndarray, n_bases: int, k: int = 6) -> int:
    """Bases inside ``<oov>`` tokens, from the per-token real-base counts (0 marks ``<oov>``)."""
    oov = np.asarray(n_real) == 0
    lost = int(oov.sum()) * k
    if oov.size and oov[-1] and n_bases % k:  # a short tail chunk holds fewer than k bases
        lost -= k - n_bases % k
    return lost


def encode_kmers(content: str | bytes, layout: DnaLayout, *, lead: int = 0, trail: int = 0) -> np.ndarray:
    """k-mer ids (int64) for DNA content that has already been stripped; the fast path.

    ``lead``/``trail`` leave that many uninitialised slots before/after the k-mers, so callers can
    add tags without copying a genome-sized array again.
    """
    return _encode(_as_bytes(content), layout, lead, trail)[0]


def encode_dna(content: str | bytes, layout: DnaLayout) -> DnaEncoding:
    """k-mer ids and the per-token real-base counts (the official ``token_mask`` values)."""
    data = _as_bytes(content)
    ids, ok = _encode(data, layout, 0, 0)
    n_real = ok.astype(np.int8) * np.int8(layout.k)
    tail = len(data) % layout.k
    if tail and ok[-1]:
        n_real[-1] = tail
    return DnaEncoding(ids=ids, n_real=n_real, n_bases=len(data), k=layout.k)


@lru_cache(maxsize=8)
def _pair_table(k: int) -> np.ndarray:
    """uint16 (two bytes, little-endian) -> packed 2-base digit 0..15; anything else -> a value that
    pushes the packed k-mer index past 4**k. Halves the lookups of the byte table."""
    table = np.full(65536, 1 << (2 * k + 2), dtype=np.int64 if k > 12 else np.int32)
    for a, first in enumerate(BASES):
        for b, second in enumerate(BASES):
            for x in (first, first.lower()):
                for y in (second, second.lower()):
                    table[ord(x) | (ord(y) << 8)] = a * 4 + b
    return table


def _encode(data: bytes, layout: DnaLayout, lead: int, trail: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids with ``lead``/``trail`` spare slots, validity of each k-mer)."""
    k = layout.k
    n_full, tail = divmod(len(data), k)
    n_tokens = n_full + (1 if tail else 0)
    raw = np.frombuffer(data, dtype=np.uint8)
    if k % 2 == 0 and np.little_endian:
        pairs = np.take(_pair_table(k), raw[: n_full * k].view(np.uint16)).reshape(n_full, k // 2)
        packed = pairs[:, 0].copy()
        for j in range(1, k // 2):
            packed <<= 4
            packed += pairs[:, j]
    else:
        table, _ = _digit_table(k)
        cols = raw[: n_full * k].reshape(n_full, k)
        packed = table[cols[:, 0]]
        for j in range(1, k):
            packed <<= 2
            packed += table[cols[:, j]]
    limit = layout.n_kmers
    out = np.empty(lead + n_tokens + trail, dtype=np.int64)
    body = out[lead : lead + n_tokens]
    ok = np.empty(n_tokens, dtype=bool)
    np.less(packed, limit, out=ok[:n_full])
    body[:n_full] = packed
    body[:n_full] += layout.kmer_start
    body[:n_full][~ok[:n_full]] = layout.oov_id
    if tail:
        table, _ = _digit_table(k)
        value = 0
        for byte in raw[n_full * k :]:
            value = value * 4 + int(table[byte])
        value *= 4 ** (k - tail)  # right-pad with A (digit 0)
        ok[-1] = value < limit
        body[-1] = layout.kmer_start + value if ok[-1] else layout.oov_id
    return out, ok


def kmers_to_bases(index: np.ndarray | list[int], k: int = 6) -> str:
    """Bases of k-mer *indices* (id minus the first k-mer id), concatenated."""
    idx = np.asarray(index, dtype=np.int64)
    return _letter_table(k)[idx].tobytes().decode("ascii") if idx.size else ""


def decode_kmers(ids: np.ndarray | list[int], layout: DnaLayout) -> str:
    """Bases of a run of k-mer ids (the padded tail is not removed, as in the official decode)."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return ""
    index = arr - layout.kmer_start
    if index.min() < 0 or index.max() >= layout.n_kmers:
        bad = int(arr[(index < 0) | (index >= layout.n_kmers)][0])
        raise ValueError(f"token id {bad} is not a {layout.k}-mer id")
    return kmers_to_bases(index, layout.k)


def kmer_digits(ids: np.ndarray, layout: DnaLayout) -> np.ndarray:
    """(n, k) base digits (A=0, T=1, C=2, G=3) of k-mer ids; for FNS and base-level maths."""
    index = np.asarray(ids, dtype=np.int64) - layout.kmer_start
    shifts = 2 * np.arange(layout.k - 1, -1, -1, dtype=np.int64)
    return ((index[:, None] >> shifts[None, :]) & 3).astype(np.int8)
