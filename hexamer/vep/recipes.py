"""The two variant-effect recipes: exact definitions, and a plain reference implementation.

**Window likelihood** (BRCA2, TraitGym). A window of ``window`` bp (default 8,192) around the
variant: ``[p0 - window//2, p0 + window - window//2)`` with ``p0`` the 0-based position of the first
REF base, clipped at the contig ends (and stretched right so that a long REF fits). The alt window
is the ref window with REF replaced by ALT, keeping both flanks, so for an indel the two windows
have different lengths but cover the same genomic interval. Each window is scored as
``<dna>window`` (no closing tag) with FNS base-level log-probabilities, and

    LL(window) = SUM over the window's scored bases of log P(base | everything before it)
    score      = LL(alt window) - LL(ref window)        (negative: alt is less likely)

The sum, not the mean: with a mean an indel would be rewarded or penalised for changing the number
of bases, whereas the sum compares the likelihood of the two haplotypes of the same region.
Bases in ``<oov>`` chunks (``N``) are not scored. With ``rc_average`` the same delta is computed
on the reverse-complemented windows and the two deltas are averaged.

With ``window_grid = G > 1`` (off by default) the window is centred on the middle of the G-bp tile
holding the variant instead of on the variant, so the variant sits at most G/2 bp off centre and
every variant of a tile shares one ref window: its reference forward runs once for all of them
(dense panels, e.g. ``window_grid=1024`` with 8,192 bp windows). ``G`` must be at most half the
window, so each flank keeps at least a quarter of it.

**Next base** (ClinVar). The left context ending right before the variant, at least ``context`` bp
(default 24,576 = 4,096 tokens), is fed as ``<dna>context``; the next token's distribution is
marginalised (FNS, over the DNA block only) to the first base, and

    score = log P(REF) - log P(ALT)                     (positive: alt is less likely)

SNVs only. The context starts on a grid so that nearby variants can share one forward (see
:func:`context_anchor`): by default it is 24,576 to 30,714 bp long, and ``context_grid=6`` gives
the fixed-length context of the published script (which used 24,000 bp). Leading ``N`` bases are
dropped and the start moved right to keep the variant on a 6-mer boundary. Context and grid are
clipped so that every prompt fits the model (the context first; the grid gets what is left).

Differences from the published evaluation scripts, on purpose: bp-level FNS scores (the scripts'
headline numbers are token-level); the next-base marginal is taken over the 4,096 DNA k-mers only
(the ClinVar script also folds in every all-ACGT BPE token); LL is a sum, not a mean (same
ranking for SNVs, see above).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from hexamer.fns import base_marginals, log_base_marginals
from hexamer.fns.tables import BASE_INDEX
from hexamer.tokenizer.dna import encode_kmers

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_CONTEXT_GRID",
    "DEFAULT_WINDOW",
    "RECIPES",
    "NextBaseContext",
    "alt_window",
    "bp_log_likelihood",
    "context_anchor",
    "context_start",
    "naive_next_base_scores",
    "naive_window_score",
    "reverse_complement",
    "window_bounds",
    "window_centre",
    "window_ll",
    "window_tokens",
]

RECIPES = ("window", "next_base")
DEFAULT_WINDOW = 8192
DEFAULT_CONTEXT = 24576
DEFAULT_CONTEXT_GRID = 6144

_COMPLEMENT = str.maketrans("ACGTNacgtn", "TGCANtgcan")


def reverse_complement(seq: str) -> str:
    """Reverse complement (A<->T, C<->G, N stays N; case kept)."""
    return seq.translate(_COMPLEMENT)[::-1]


# --------------------------------------------------------------------------- window recipe


def window_bounds(p0: int, ref_len: int, contig_len: int, window: int, grid: int = 1) -> tuple[int, int]:
    """``[start, end)`` of the window around a variant whose REF starts at 0-based ``p0``.

    ``grid > 1`` centres the window on the middle of the ``grid``-bp tile holding ``p0`` instead of
    on ``p0`` itself, so every variant of a tile gets the same ref window (see
    :func:`window_centre`).
    """
    c = window_centre(p0, grid)
    start = max(0, c - window // 2)
    end = min(contig_len, max(c + window - window // 2, p0 + ref_len))
    return start, end


def window_centre(p0: int, grid: int = 1) -> int:
    """The point a variant's window is centred on: ``p0`` itself, or with ``grid > 1`` the middle
    of the tile ``[grid * (p0 // grid), grid * (p0 // grid + 1))`` — at most ``grid // 2`` bp away."""
    if grid <= 1:
        return p0
    return grid * (p0 // grid) + grid // 2


def alt_window(ref_window: str, offset: int, ref: str, alt: str) -> str:
    """The ref window with ``ref`` (at ``offset``) replaced by ``alt``; both flanks kept."""
    return ref_window[:offset] + alt + ref_window[offset + len(ref) :]


def window_tokens(n_bases: int, k: int = 6) -> int:
    """Tokens of ``<dna>`` + a window of ``n_bases``."""
    return 1 + math.ceil(n_bases / k)


def naive_window_score(carbon: Carbon, ref_window: str, alt_win: str, *, rc_average: bool = False) -> float:
    """The window score by the book: one full forward per window (four with ``rc_average``)."""
    delta = window_ll(carbon, alt_win) - window_ll(carbon, ref_window)
    if rc_average:
        rc = window_ll(carbon, reverse_complement(alt_win)) - window_ll(
            carbon, reverse_complement(ref_window)
        )
        delta = (delta + rc) / 2
    return delta


def window_ll(carbon: Carbon, seq: str) -> float:
    """LL of ``<dna>seq``: one full forward; FNS per-base log-probabilities summed in float64.

    The same per-base terms as ``Carbon.score(seq, level="bp").per_base``, but the marginals are
    taken in float64: in float32 each term carries ~1e-6 of rounding (a logsumexp of ~7 minus
    another), which over an 8 kb window adds up to ~1e-4 in a difference of two LLs.
    """
    remote = getattr(carbon, "window_ll", None)  # hexamer.remote computes it from server log-probs
    if remote is not None:
        return float(remote(seq))
    ids, start, targets, n_real, _ = carbon._dna_inputs(seq, "", 0)
    logits = carbon._kmer_logits([ids])[0, start - 1 : start - 1 + len(targets)]
    return bp_log_likelihood(logits, targets, n_real)


def bp_log_likelihood(kmer_logits: torch.Tensor, targets: np.ndarray, n_real: np.ndarray) -> float:
    """Sum over the real bases of ``log P_j(true base)``: FNS marginals in float64.

    ``kmer_logits[t]`` predicts target k-mer ``targets[t]`` (an index in the k-mer block) of which
    the first ``n_real[t]`` bases are real (0 for ``<oov>``). The marginals are sums of the float64
    block softmax, so this equals ``score_bases(...).per_base.sum()`` in float64 to ~1e-13 at a
    fraction of the cost (one ``exp`` per k-mer instead of one per k-mer and base position).
    """
    k = round(math.log(kmer_logits.shape[-1], 4))
    device = kmer_logits.device
    tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64)).to(device)
    real = torch.from_numpy(n_real.astype(np.int64)).to(device)
    digits = (tgt[:, None] // 4 ** torch.arange(k - 1, -1, -1, device=device)) % 4
    probs = base_marginals(kmer_logits.double()).gather(-1, digits[..., None]).squeeze(-1)
    mask = torch.arange(k, device=device) < real[:, None]
    return float(probs.log()[mask].sum())


# --------------------------------------------------------------------------- next-base recipe


@dataclass(frozen=True)
class NextBaseContext:
    """Context settings of the next-base recipe, clipped to a model.

    Every context is ``context`` to ``context + grid - 6`` bp long (before leading-``N`` removal).
    """

    context: int
    grid: int

    @classmethod
    def for_model(cls, context: int, grid: int, max_positions: int, k: int = 6) -> NextBaseContext:
        """Round to whole k-mers and clip so that ``<dna>`` + the longest context fits the model."""
        if context < 0:
            raise ValueError(f"context must be >= 0 bp, got {context}")
        if grid < 1:
            raise ValueError(f"context_grid must be >= 1 bp, got {grid}")
        limit = k * (max_positions - 1)
        context = min(context - context % k, limit)
        grid = max(k, grid - grid % k)
        grid = min(grid, limit - context + k)
        return cls(context=context, grid=grid)


def context_anchor(p0: int, context: int, grid: int, k: int = 6) -> int:
    """Start of the context of a variant at 0-based ``p0``, before leading-``N`` removal.

    The largest point ``a <= p0 - context`` with ``a = p0 mod k`` on a grid of step ``grid``, and
    never below the contig start. Every variant whose context starts at the same anchor (same
    6-mer phase, within one grid step) shares that prefix, so the engine runs it once; the
    anchor depends only on ``p0``, never on which other variants are in the input.
    """
    phase = p0 % k
    anchor = phase + grid * math.floor((p0 - context - phase) / grid)
    return max(anchor, phase)


def context_start(anchor: int, p0: int, leading_n: int, k: int = 6) -> int:
    """The context start after dropping ``leading_n`` N bases, rounded up to the variant's phase."""
    drop = min(leading_n, p0 - anchor)
    return anchor + k * math.ceil(drop / k)


def leading_n(seq: str) -> int:
    """Number of ``N`` at the start of ``seq``."""
    return len(seq) - len(seq.lstrip("N"))


@torch.inference_mode()
def naive_next_base_scores(carbon: Carbon, context: str, ref: str, alts: Sequence[str]) -> list[float]:
    """``log P(ref) - log P(alt)`` for the base after ``context``: one forward per ALT, by the book."""
    layout = carbon.layout
    if len(context) % layout.k:
        raise ValueError(f"context of {len(context)} bp is not a whole number of {layout.k}-mers")
    remote = getattr(carbon, "next_base_log_marginals", None)  # hexamer.remote: from server log-probs
    if remote is not None:
        first = remote(context)
        return [float(first[BASE_INDEX[ref]] - first[BASE_INDEX[alt]]) for alt in alts]
    ids = [layout.begin_id, *encode_kmers(context, layout).tolist()]
    out = []
    for alt in alts:
        x = torch.tensor([ids], device=carbon.model.device)
        logits = carbon.model(x, logits_at="last", vocab_rows=(layout.kmer_start, layout.kmer_stop)).logits
        assert logits is not None
        first = log_base_marginals(logits[0].double())[0].cpu()
        out.append(float(first[BASE_INDEX[ref]] - first[BASE_INDEX[alt]]))
    return out
