"""Choosing the next DNA token base by base (FNS decoding) or as a whole k-mer (token decoding).

Inputs are k-mer logits ``(B, 4**k)`` (DNA rows only, vocabulary order; k inferred) and the output
is a ``(B,)`` long tensor of k-mer indices (add the first k-mer id to get token ids). Bases are
numbered in ATCG order (A=0, T=1, C=2, G=3); masks use that order too (see ``tables.from_acgt``).

Base-pair decoding, the conventions fixed here:

1. The k-mer distribution is the softmax over the DNA block only, computed in float32 (float64
   for float64 input). ``<oov>``, tags and EOS can never be produced in bp mode.
2. **Temperature** divides the k-mer logits *before* marginalising. It is not the same as
   tempering each 4-way marginal: T -> 0 concentrates the marginals on the argmax k-mer (token
   greedy), which is why ``temperature`` must be > 0 and bp greedy is a separate function.
3. The per-position marginals ``P_j`` are taken in log space (logsumexp), then the optional
   per-position **mask** ``allowed`` ``(B, k, 4)`` (or ``(k, 4)`` for every row) zeroes disallowed
   bases and the remaining ones are renormalised. A position with no allowed base raises
   ``ValueError`` ("impossible mask") naming the row and position; one whose allowed bases all
   have probability exactly 0 (``-inf`` logits) raises as well.
4. **Greedy**: argmax of each (masked) ``P_j``; exact ties go to the lowest ATCG index.
5. **Top-p** is applied to each 4-way marginal separately: sort bases by descending probability,
   ties broken by A,T,C,G order, and keep the shortest prefix whose mass reaches ``top_p``
   (the top base is always kept, zero-probability bases never), then renormalise.
6. **Sampling**: positions are independent. Each (row, position) consumes exactly one float64
   uniform ``u`` in ``[0, 1)``; the base is the first one, in ATCG order, whose cumulative
   probability exceeds ``u`` (inverse CDF). Random numbers are drawn as follows:

   * ``generator`` is a list of B generators: row r draws ``torch.rand(k, dtype=float64,
     generator=generator[r])`` (positions j = 0..k-1 in order). A row's result then depends only
     on its own logits and generator, never on the rest of the batch.
   * a single generator (or ``None`` = torch's default generator of the logits' device): one call
     ``torch.rand((B, k), dtype=float64)``, row-major.

Token decoding (for comparison) uses the standard nucleus rule on the 4**k k-mer probabilities
(same tie and keep rules as 5), and one uniform per row drawn the same way, inverse CDF over k-mer
indices in increasing order.

Exact base counts: to emit N bases, decode ``tokens_needed(N)`` = ceil(N / k) tokens and cut the
decoded string with ``trim_bases(seq, N)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import torch

from hexamer.fns.marginals import _log_base_mass, compute_dtype
from hexamer.fns.tables import infer_k, kmer_digits, kmer_index

__all__ = [
    "GeneratorArg",
    "bp_greedy",
    "bp_sample",
    "bp_sampling_probs",
    "kmer_mask_from_positions",
    "nucleus_mask",
    "sample_from_probs",
    "token_greedy",
    "token_sample",
    "token_sampling_probs",
    "tokens_needed",
    "trim_bases",
]

GeneratorArg = torch.Generator | Sequence[torch.Generator] | None
_S = TypeVar("_S", str, bytes, list, tuple, torch.Tensor)


# --------------------------------------------------------------------------- validation helpers


def _check_logits(kmer_logits: torch.Tensor) -> int:
    if not isinstance(kmer_logits, torch.Tensor) or not kmer_logits.dtype.is_floating_point:
        raise TypeError("kmer_logits must be a floating-point tensor")
    if kmer_logits.dim() != 2:
        raise ValueError(f"kmer_logits must have shape (B, 4**k), got {tuple(kmer_logits.shape)}")
    k = infer_k(kmer_logits.shape[-1])
    if torch.isnan(kmer_logits).any():
        rows = torch.isnan(kmer_logits).any(-1).nonzero().flatten().tolist()
        raise ValueError(f"kmer_logits contain NaN (rows {rows[:10]})")
    return k


def _check_temperature(temperature: float) -> None:
    if not (isinstance(temperature, int | float) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(
            f"temperature must be a finite number > 0, got {temperature!r} "
            "(use bp_greedy / token_greedy for greedy decoding)"
        )


def _check_top_p(top_p: float) -> None:
    if not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        raise ValueError(f"top_p must lie in (0, 1], got {top_p!r}")


def _position_mask(
    allowed: torch.Tensor | None, batch: int, k: int, device: torch.device
) -> torch.Tensor | None:
    """Validate a per-position mask and broadcast it to ``(B, k, 4)``."""
    if allowed is None:
        return None
    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool:
        raise TypeError("allowed must be a bool tensor of shape (B, k, 4) or (k, 4), bases in ATCG order")
    if allowed.shape not in ((batch, k, 4), (k, 4)):
        raise ValueError(f"allowed must have shape ({batch}, {k}, 4) or ({k}, 4), got {tuple(allowed.shape)}")
    allowed = allowed.to(device).expand(batch, k, 4)
    empty = ~allowed.any(-1)
    if empty.any():
        r, j = (int(v) for v in empty.nonzero()[0])
        raise ValueError(f"impossible mask: row {r}, position {j} has no allowed base")
    return allowed


def _uniforms(generator: GeneratorArg, batch: int, n: int, device: torch.device) -> torch.Tensor:
    """``(B, n)`` float64 uniforms in the documented consumption order."""
    if generator is None:
        return torch.rand((batch, n), dtype=torch.float64, device=device)
    if isinstance(generator, torch.Generator):
        u = torch.rand((batch, n), dtype=torch.float64, device=generator.device, generator=generator)
        return u.to(device)
    gens = list(generator)
    if len(gens) != batch:
        raise ValueError(f"got {len(gens)} generators for a batch of {batch} rows (need one per row)")
    if batch == 0:
        return torch.empty((0, n), dtype=torch.float64, device=device)
    rows = [torch.rand(n, dtype=torch.float64, device=g.device, generator=g).to(device) for g in gens]
    return torch.stack(rows)


# --------------------------------------------------------------------------- generic pieces


def nucleus_mask(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Top-p keep-set over the last dimension (bool, same shape as ``probs``).

    Keeps the shortest run of entries, in descending probability with ties broken by lower index,
    whose mass reaches ``top_p``; the top entry is always kept and zero-probability entries never
    (unless the top itself is 0). ``probs`` need not be normalised: mass is relative to the row sum.
    """
    _check_top_p(top_p)
    if probs.shape[-1] == 0:
        return torch.zeros_like(probs, dtype=torch.bool)
    total = probs.sum(-1, keepdim=True)
    srt, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    before = torch.cumsum(srt, dim=-1) - srt
    keep_sorted = (before < top_p * total) & (srt > 0)
    keep_sorted[..., 0] = True
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def _nucleus_renormalised(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """``probs`` restricted to the top-``top_p`` nucleus of the last dimension (all of it at 1.0),
    renormalised to sum to 1: the last step of both decoding levels."""
    if top_p < 1.0:
        probs = torch.where(nucleus_mask(probs, top_p), probs, 0.0)
    return probs / probs.sum(-1, keepdim=True)


def sample_from_probs(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw over the last dimension: first index whose cumulative mass exceeds ``u·total``.

    ``probs`` ``(..., n)`` is non-negative (need not be normalised), ``uniforms`` ``(...)`` in
    [0, 1). A zero-probability entry is never returned.
    """
    p = probs.to(torch.float64)
    cdf = torch.cumsum(p, dim=-1)
    thr = uniforms.to(torch.float64)[..., None] * cdf[..., -1:]
    idx = (cdf <= thr).sum(-1)
    n = p.shape[-1]
    last_pos = n - 1 - torch.argmax(torch.flip(p > 0, dims=(-1,)).to(torch.uint8), dim=-1)
    return torch.minimum(idx, last_pos)


# --------------------------------------------------------------------------- base-pair decoding


def _masked_log_marginals(
    kmer_logits: torch.Tensor, temperature: float, allowed: torch.Tensor | None
) -> torch.Tensor:
    """Renormalised, masked log-marginals ``(B, k, 4)`` in float64; raises on impossible rows."""
    k = _check_logits(kmer_logits)
    batch = kmer_logits.shape[0]
    x = kmer_logits.to(compute_dtype(kmer_logits))
    if temperature != 1.0:
        x = x / temperature
    logm = (_log_base_mass(x, k) - torch.logsumexp(x, dim=-1)[..., None, None]).to(torch.float64)
    mask = _position_mask(allowed, batch, k, kmer_logits.device)
    if mask is not None:
        logm = logm.masked_fill(~mask, -torch.inf)
    dead = torch.isneginf(logm).all(-1)
    if dead.any():
        r, j = (int(v) for v in dead.nonzero()[0])
        raise ValueError(
            f"row {r}, position {j}: every allowed base has probability 0 (all their k-mer logits are -inf)"
        )
    return torch.log_softmax(logm, dim=-1)


def bp_greedy(kmer_logits: torch.Tensor, *, allowed: torch.Tensor | None = None) -> torch.Tensor:
    """FNS greedy: argmax of each base marginal (ties -> lowest ATCG index), recombined. ``(B,)`` long.

    ``allowed`` ``(B, k, 4)`` / ``(k, 4)`` bool restricts each position to the allowed bases.
    """
    logm = _masked_log_marginals(kmer_logits, 1.0, allowed)
    return kmer_index(torch.argmax(logm, dim=-1))


def bp_sampling_probs(
    kmer_logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """The exact per-position distributions ``(B, k, 4)`` (float64, ATCG) that :func:`bp_sample` draws from.

    temperature on k-mer logits -> log-marginals -> mask and renormalise -> per-position top-p and
    renormalise.
    """
    _check_temperature(temperature)
    _check_top_p(top_p)
    probs = _masked_log_marginals(kmer_logits, float(temperature), allowed).exp()
    return _nucleus_renormalised(probs, top_p)


def bp_sample(
    kmer_logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    allowed: torch.Tensor | None = None,
    generator: GeneratorArg = None,
) -> torch.Tensor:
    """FNS sampling: draw each of the k bases independently from its marginal. ``(B,)`` long.

    ``generator``: one ``torch.Generator`` per row (a list; makes each row independent of the batch),
    a single generator, or ``None`` for torch's default one. Uses k float64 uniforms per row, for
    positions 0..k-1 in order (see the module docstring).
    """
    probs = bp_sampling_probs(kmer_logits, temperature=temperature, top_p=top_p, allowed=allowed)
    batch, k, _ = probs.shape
    u = _uniforms(generator, batch, k, probs.device)
    return kmer_index(sample_from_probs(probs, u))


# --------------------------------------------------------------------------- token-level decoding


def kmer_mask_from_positions(allowed: torch.Tensor) -> torch.Tensor:
    """Allowed-k-mer mask ``(B, 4**k)`` from per-position masks ``(B, k, 4)``: all bases allowed.

    Raises ``ValueError`` ("impossible mask") if some position allows no base.
    """
    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool or allowed.dim() != 3:
        raise TypeError("allowed must be a bool tensor of shape (B, k, 4), bases in ATCG order")
    batch, k, four = allowed.shape
    if four != 4:
        raise ValueError(f"allowed must have shape (B, k, 4), got {tuple(allowed.shape)}")
    _position_mask(allowed, batch, k, allowed.device)
    digits = kmer_digits(k, allowed.device)  # (4**k, k)
    pos = torch.arange(k, device=allowed.device)
    return allowed[:, pos, digits].all(-1)  # (B, 4**k, k) -> (B, 4**k)


def _masked_token_logits(
    kmer_logits: torch.Tensor, temperature: float, allowed_kmers: torch.Tensor | None
) -> torch.Tensor:
    _check_logits(kmer_logits)
    x = kmer_logits.to(torch.float64)
    if temperature != 1.0:
        x = x / temperature
    if allowed_kmers is not None:
        if not isinstance(allowed_kmers, torch.Tensor) or allowed_kmers.dtype != torch.bool:
            raise TypeError("allowed_kmers must be a bool tensor of shape (B, 4**k)")
        if allowed_kmers.shape not in (x.shape, x.shape[-1:]):
            raise ValueError(
                f"allowed_kmers must have shape {tuple(x.shape)}, got {tuple(allowed_kmers.shape)}"
            )
        allowed_kmers = allowed_kmers.to(x.device).expand_as(x)
        none = ~allowed_kmers.any(-1)
        if none.any():
            raise ValueError(f"impossible mask: row {int(none.nonzero()[0])} allows no k-mer")
        x = x.masked_fill(~allowed_kmers, -torch.inf)
    dead = torch.isneginf(x).all(-1)
    if dead.any():
        raise ValueError(f"row {int(dead.nonzero()[0])}: every allowed k-mer has probability 0")
    return x


def token_greedy(kmer_logits: torch.Tensor, *, allowed_kmers: torch.Tensor | None = None) -> torch.Tensor:
    """Token-level greedy: argmax k-mer (ties -> lowest index) among the allowed ones. ``(B,)`` long."""
    return torch.argmax(_masked_token_logits(kmer_logits, 1.0, allowed_kmers), dim=-1)


def token_sampling_probs(
    kmer_logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    allowed_kmers: torch.Tensor | None = None,
) -> torch.Tensor:
    """The k-mer distribution ``(B, 4**k)`` (float64) that :func:`token_sample` draws from."""
    _check_temperature(temperature)
    _check_top_p(top_p)
    probs = torch.softmax(_masked_token_logits(kmer_logits, float(temperature), allowed_kmers), dim=-1)
    return _nucleus_renormalised(probs, top_p)


def token_sample(
    kmer_logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    allowed_kmers: torch.Tensor | None = None,
    generator: GeneratorArg = None,
) -> torch.Tensor:
    """Standard (nucleus) sampling of a whole k-mer. One float64 uniform per row. ``(B,)`` long."""
    probs = token_sampling_probs(
        kmer_logits, temperature=temperature, top_p=top_p, allowed_kmers=allowed_kmers
    )
    u = _uniforms(generator, probs.shape[0], 1, probs.device)[:, 0]
    return sample_from_probs(probs, u)


# --------------------------------------------------------------------------- exact base counts


def tokens_needed(n_bp: int, k: int = 6) -> int:
    """Tokens to decode for ``n_bp`` bases: ``ceil(n_bp / k)``."""
    if n_bp < 0 or k < 1:
        raise ValueError(f"need n_bp >= 0 and k >= 1, got n_bp={n_bp}, k={k}")
    return -(-n_bp // k)


def trim_bases(seq: _S, n: int) -> _S:
    """The first ``n`` bases of a decoded sequence (str, list or 1-D tensor); error if it is shorter."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if len(seq) < n:
        raise ValueError(f"sequence has {len(seq)} bases, fewer than the {n} requested")
    return seq[:n]
