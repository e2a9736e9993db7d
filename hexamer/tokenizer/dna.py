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


def encode_kmers(content: str | bytes, layout: DnaLayout) -> np.ndarray:
    """k-mer ids (int64) for DNA content that has already been stripped; the fast path."""
    return _encode(_as_bytes(content), layout)[0]


def encode_dna(content: str | bytes, layout: DnaLayout) -> DnaEncoding:
    """k-mer ids and the per-token real-base counts (the official ``token_mask`` values)."""
    data = _as_bytes(content)
    ids, n_real = _encode(data, layout)
    return DnaEncoding(ids=ids, n_real=n_real, n_bases=len(data), k=layout.k)


def _encode(data: bytes, layout: DnaLayout) -> tuple[np.ndarray, np.ndarray]:
    k = layout.k
    table, invalid = _digit_table(k)
    n = len(data)
    n_full, tail = divmod(n, k)
    n_tokens = n_full + (1 if tail else 0)
    packed = np.empty(n_tokens, dtype=table.dtype)
    raw = np.frombuffer(data, dtype=np.uint8)
    if n_full:
        cols = raw[: n_full * k].reshape(n_full, k)
        acc = table[cols[:, 0]]
        for j in range(1, k):
            acc <<= 2
            acc += table[cols[:, j]]
        packed[:n_full] = acc
    if tail:
        value = 0
        for byte in raw[n_full * k :]:
            value = value * 4 + int(table[byte])
        packed[n_full] = value * 4 ** (k - tail)  # right-pad with A (digit 0)
    ok = packed < invalid
    ids = np.where(ok, packed.astype(np.int64) + layout.kmer_start, layout.oov_id)
    n_real = np.where(ok, k, 0).astype(np.int8)
    if tail and ok[-1]:
        n_real[-1] = tail
    return ids, n_real


def decode_kmers(ids: np.ndarray | list[int], layout: DnaLayout) -> str:
    """Bases of a run of k-mer ids (the padded tail is not removed, as in the official decode)."""
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return ""
    index = arr - layout.kmer_start
    if index.min() < 0 or index.max() >= layout.n_kmers:
        bad = int(arr[(index < 0) | (index >= layout.n_kmers)][0])
        raise ValueError(f"token id {bad} is not a {layout.k}-mer id")
    return _letter_table(layout.k)[index].tobytes().decode("ascii")


def kmer_digits(ids: np.ndarray, layout: DnaLayout) -> np.ndarray:
    """(n, k) base digits (A=0, T=1, C=2, G=3) of k-mer ids; for FNS and base-level maths."""
    index = np.asarray(ids, dtype=np.int64) - layout.kmer_start
    shifts = 2 * np.arange(layout.k - 1, -1, -1, dtype=np.int64)
    return ((index[:, None] >> shifts[None, :]) & 3).astype(np.int8)
