"""Digit tables that tie a k-mer index to its k bases.

Everything in ``hexamer.fns`` works on k-mer *indices* ``f`` in ``[0, 4**k)``, the position of a
k-mer inside the DNA block of the vocabulary (token id minus the first k-mer id). Carbon lists the
k-mers in A,T,C,G product order with the first base most significant, so

    f = sum_j d(b_j) * 4**(k - 1 - j),   d: A=0, T=1, C=2, G=3.

Bases are therefore numbered 0..3 in **ATCG** order everywhere inside this package (the order the
vocabulary uses, so no table lookups are needed on the hot path). Users expect A,C,G,T columns:
:func:`to_acgt` / :func:`from_acgt` reorder the last dimension at the API boundary.

The one-hot map is the only sizeable table (4096 x 6 x 4 for k=6); it is built once per
``(k, dtype, device)`` and cached. Cached tensors are shared: never modify them in place.
"""

from __future__ import annotations

from functools import lru_cache
from typing import overload

import torch

__all__ = [
    "ACGT_FROM_ATCG",
    "ATCG_FROM_ACGT",
    "BASES",
    "BASE_INDEX",
    "bases_to_kmer",
    "digits_of",
    "from_acgt",
    "infer_k",
    "kmer_digits",
    "kmer_index",
    "kmer_to_bases",
    "n_kmers",
    "onehot_map",
    "to_acgt",
]

#: Base alphabet in internal (vocabulary) order; the digit of a base is its index here.
BASES = "ATCG"
BASE_INDEX = {b: i for i, b in enumerate(BASES)}
#: ``x_acgt = x_atcg[..., ACGT_FROM_ATCG]``: columns A, C, G, T taken from an ATCG-ordered tensor.
ACGT_FROM_ATCG = (0, 2, 3, 1)
#: ``x_atcg = x_acgt[..., ATCG_FROM_ACGT]``: the inverse permutation.
ATCG_FROM_ACGT = (0, 3, 1, 2)

_MAX_K = 12


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= _MAX_K:
        raise ValueError(f"k must be an int between 1 and {_MAX_K}, got {k!r}")


def n_kmers(k: int = 6) -> int:
    """Number of k-mers, ``4**k`` (4096 for k=6)."""
    _check_k(k)
    return 4**k


def infer_k(n: int) -> int:
    """Recover k from a k-mer block size ``n = 4**k``; ``ValueError`` if ``n`` is not such a power.

    Functions taking k-mer logits infer k from their last dimension so k can never disagree with
    the tensor.
    """
    k = 0
    m = n
    while m > 1 and m % 4 == 0:
        m //= 4
        k += 1
    if m != 1 or k == 0 or k > _MAX_K:
        raise ValueError(
            f"the last dimension must be the k-mer block of size 4**k (e.g. 4096 for k=6), got {n}"
        )
    return k


def _device(device: torch.device | str | None) -> torch.device:
    return torch.device("cpu") if device is None else torch.device(device)


@lru_cache(maxsize=32)
def _digits_cached(k: int, device: torch.device) -> torch.Tensor:
    idx = torch.arange(4**k, dtype=torch.long, device=device)
    powers = 4 ** torch.arange(k - 1, -1, -1, dtype=torch.long, device=device)
    return (idx[:, None] // powers) % 4


def kmer_digits(k: int = 6, device: torch.device | str | None = None) -> torch.Tensor:
    """The base table: ``(4**k, k)`` long tensor, row f = the ATCG digits of k-mer f.

    Cached per ``(k, device)``; treat the result as read-only.
    """
    _check_k(k)
    return _digits_cached(k, _device(device))


@lru_cache(maxsize=32)
def _onehot_cached(k: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    digits = _digits_cached(k, device)
    return torch.nn.functional.one_hot(digits, 4).to(dtype)


def onehot_map(
    k: int = 6, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """The one-hot map ``(4**k, k, 4)``: entry ``[f, j, b]`` is 1 iff k-mer f has base b at j.

    ``probs @ onehot_map(k).reshape(4**k, 4 * k)`` turns a k-mer distribution into all k base
    marginals in a single matmul. Cached per ``(k, dtype, device)``; treat it as read-only.
    """
    _check_k(k)
    return _onehot_cached(k, dtype, _device(device))


def _powers(k: int, device: torch.device) -> torch.Tensor:
    return 4 ** torch.arange(k - 1, -1, -1, dtype=torch.long, device=device)


def kmer_index(digits: torch.Tensor) -> torch.Tensor:
    """Recombine base digits ``(..., k)`` (ATCG order, values 0..3) into k-mer indices ``(...)``."""
    if digits.dim() == 0:
        raise ValueError("digits must have a trailing dimension of length k")
    k = digits.shape[-1]
    _check_k(k)
    if digits.dtype.is_floating_point or digits.dtype == torch.bool:
        raise TypeError(f"digits must be an integer tensor, got {digits.dtype}")
    if digits.numel() and (int(digits.min()) < 0 or int(digits.max()) > 3):
        raise ValueError("base digits must lie in 0..3 (A=0, T=1, C=2, G=3)")
    return (digits.long() * _powers(k, digits.device)).sum(-1)


def digits_of(index: torch.Tensor, k: int = 6) -> torch.Tensor:
    """Split k-mer indices ``(...)`` into their ATCG digits ``(..., k)``, first base first."""
    _check_k(k)
    if index.dtype.is_floating_point or index.dtype == torch.bool:
        raise TypeError(f"k-mer indices must be an integer tensor, got {index.dtype}")
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= 4**k):
        raise ValueError(f"k-mer indices must lie in [0, {4**k}) for k={k}")
    return (index.long()[..., None] // _powers(k, index.device)) % 4


@overload
def bases_to_kmer(bases: str) -> int: ...
@overload
def bases_to_kmer(bases: torch.Tensor) -> torch.Tensor: ...
def bases_to_kmer(bases: str | torch.Tensor) -> int | torch.Tensor:
    """Recombine chosen bases into a k-mer index.

    A string (``"ATCGAT"`` -> 433; upper or lower case, k = its length) gives an ``int``; a tensor
    of base digits ``(..., k)`` in ATCG order gives a tensor of indices (same as :func:`kmer_index`).
    """
    if isinstance(bases, str):
        _check_k(len(bases))
        f = 0
        for ch in bases.upper():
            d = BASE_INDEX.get(ch)
            if d is None:
                raise ValueError(f"not a k-mer over A,C,G,T: {bases!r}")
            f = 4 * f + d
        return f
    return kmer_index(bases)


def kmer_to_bases(index: int, k: int = 6) -> str:
    """The k-letter string of k-mer index ``index`` (433 -> ``"ATCGAT"`` for k=6)."""
    _check_k(k)
    if not 0 <= index < 4**k:
        raise ValueError(f"k-mer index must lie in [0, {4**k}) for k={k}, got {index}")
    return "".join(BASES[(index // 4 ** (k - 1 - j)) % 4] for j in range(k))


def _check_last4(x: torch.Tensor) -> None:
    if x.dim() == 0 or x.shape[-1] != 4:
        raise ValueError(f"expected a last dimension of 4 bases, got shape {tuple(x.shape)}")


def to_acgt(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from internal A,T,C,G to user-facing A,C,G,T (returns a copy)."""
    _check_last4(x)
    return x[..., list(ACGT_FROM_ATCG)]


def from_acgt(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from A,C,G,T (e.g. a user's mask) to internal A,T,C,G."""
    _check_last4(x)
    return x[..., list(ATCG_FROM_ACGT)]
