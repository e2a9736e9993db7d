"""The two variant-effect recipes: exact definitions, and a plain reference implementation.

**Window likelihood** (BRCA2, TraitGym). A window of ``window`` bp (default 8,192) around the
variant: ``[p0 - window//2, p0 + window - window//2)`` with ``p0`` the 0-based position of the first
REF base, clipped at the contig ends (and stretched right so that a long REF fits). The alt window
is the ref window with REF replaced by ALT. Each window is scored as ``<dna>window`` (no closing
tag) with FNS base-level log-probabilities, and

    LL(window) = SUM over the window's scored bases of log P(base | everything before it)
    score      = LL(alt window) - LL(ref window)        (negative: alt is less likely)

**Equal lengths** (:func:`window_pair_bounds`). A sum over windows of different lengths measures
the length difference (a 1.2 kb deletion would score ~ +1,700 for having 1,200 fewer bases to
pay for), so the two windows always hold the same number of bases. For an indel the window with
the shorter allele takes ``|len(ALT) - len(REF)|`` more reference bases on its right (3') flank:
a deletion's alt window, an insertion's ref window. Both windows keep the same left flank, so the
KV-cache prefix the engine shares still covers everything before the variant. Where the contig
ends before that, the missing bases are taken on the left flank instead; where the contig is too
short for both (a window already spanning the contig), the longer window gives up bases from its
right flank, then its left one, so both hold ``contig length - max(0, len(REF) - len(ALT))``
bases at most; the same cut keeps an insertion's windows within the model's context when the window
already fills it. SNVs and MNVs are unchanged.

**Unscored bases.** A 6-mer holding any non-ACGT base (``N``) is ``<oov>``; its bases have no
log-probability and are left out of LL. A variant whose own bases (REF in the ref window, ALT in
the alt window, on either strand scored) fall in such a 6-mer cannot be scored: the two windows
would differ only inside a token the model never sees, and the delta would be a meaningless
(often exactly 0.0) number; :func:`unscored_allele` names it and the engine marks the row
``skipped``. Otherwise each window's ``<oov>`` bases are counted (:func:`oov_bp`) and reported with
the score. With ``rc_average`` the same delta is computed on the reverse-complemented windows and
the two deltas are averaged.

With ``window_grid = G > 1`` (off by default) the window is centred on the middle of the G-bp tile
holding the variant instead of on the variant, so the variant sits at most G/2 bp off centre and
every variant of a tile shares one ref window: its reference forward runs once for all of them
(dense panels, e.g. ``window_grid=1024`` with 8,192 bp windows). ``G`` must be at most half the
window, so each flank keeps at least a quarter of it.

**Shortest window** (:func:`min_window`: 5 k-mers, 30 bp). FNS scores each base of a k-mer by
the marginal of that k-mer's distribution given the tokens *before* it, so the bases of one k-mer
never condition each other. A window that is only the variant's own k-mer (6 bp) scores
``log m(ALT) - log m(REF)`` of one marginal after ``<dna>``: a number that depends on the REF>ALT
pair and nothing about the site. The context a score carries is the whole k-mers before the
variant's (the left flank the variant is read in) and the k-mers after it (read given the
variant). A centred window of ``5k`` bp holds the variant's k-mer and two whole k-mers on each
side. With a window grid (at most half the window) the variant sits at most a quarter of the
window off centre, so each side still holds 7 bp or more: at least one whole k-mer before the
variant's and bases read after it. Shorter windows are refused.

**Next base** (ClinVar). The left context ending right before the variant, at least ``context`` bp
(default 24,576 = 4,096 tokens), is fed as ``<dna>context``; the next token's distribution is
marginalised (FNS, over the DNA block only) to the first base, and

    score = log P(REF) - log P(ALT)                     (positive: alt is less likely)

SNVs only. The context must be at least :func:`min_context` (two whole k-mers, 12 bp): shorter
contexts round down to no k-mer at all, and ``log P(REF) - log P(ALT)`` after a bare ``<dna>``
depends on the two bases only. The context starts on a grid so that nearby variants can share one forward (see
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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from hexamer.fns.tables import BASE_INDEX
from hexamer.io import reverse_complement

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_CONTEXT_GRID",
    "DEFAULT_WINDOW",
    "MIN_FLANK_KMERS",
    "RECIPES",
    "NextBaseContext",
    "WindowPair",
    "alt_window",
    "context_anchor",
    "context_start",
    "min_context",
    "min_window",
    "naive_next_base_scores",
    "naive_window_score",
    "next_base_scores",
    "non_acgt_positions",
    "oov_bp",
    "pair_oov_bp",
    "unscored_allele",
    "variant_windows",
    "window_bounds",
    "window_centre",
    "window_delta",
    "window_ll",
    "window_pair_bounds",
    "window_placement",
    "window_tokens",
]

RECIPES = ("window", "next_base")
DEFAULT_WINDOW = 8192
DEFAULT_CONTEXT = 24576
DEFAULT_CONTEXT_GRID = 6144
#: whole k-mers a window keeps on each side of the variant's own k-mer (and a next-base context
#: holds before it): the least context that makes a score depend on the site, see the docstring
MIN_FLANK_KMERS = 2


def min_window(k: int = 6) -> int:
    """The shortest window the window recipe scores: the variant's k-mer and
    :data:`MIN_FLANK_KMERS` whole k-mers on each side (30 bp for 6-mers)."""
    return (2 * MIN_FLANK_KMERS + 1) * k


def min_context(k: int = 6) -> int:
    """The shortest next-base context: :data:`MIN_FLANK_KMERS` whole k-mers (12 bp for 6-mers)."""
    return MIN_FLANK_KMERS * k


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


def window_placement(grid: int) -> str:
    """How windows are placed, as outputs name it: ``centred`` on each variant (``grid`` 1, the
    published recipe) or ``grid:G``, centred on G-bp tiles (:func:`window_centre`). The same variant
    scores differently under two placements, so rows, headers and calibration tables say which."""
    return "centred" if grid <= 1 else f"grid:{grid}"


def window_pair_bounds(
    p0: int,
    ref_len: int,
    alt_len: int,
    contig_len: int,
    window: int,
    grid: int = 1,
    limit: int | None = None,
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Reference spans ``[start, end)`` of the ref window and of the alt window (whose
    ``[p0, p0 + ref_len)`` is replaced by ALT), chosen so that both hold the same number of bases.

    The ref window is :func:`window_bounds`; for an indel the window with the shorter allele gets
    the length difference on its right flank (then its left one at a contig end), and when the
    contig cannot give that many bases the other window is cut from the right instead (see the
    module docstring); ``limit`` (the most bases the model takes) caps both windows the same way.
    ``None`` when the contig (or ``limit``) is too short to hold both alleles' windows at one
    length (``contig_len - |difference|`` is less than the longer allele).
    """
    start, end = window_bounds(p0, ref_len, contig_len, window, grid)
    diff = alt_len - ref_len
    if diff == 0:
        return (start, end), (start, end)
    total = min(end - start + max(diff, 0), contig_len - max(-diff, 0))
    if limit is not None:
        total = min(total, limit)
    if total < max(ref_len, alt_len):
        return None

    def span(allele_len: int) -> tuple[int, int]:
        flank = total - allele_len
        right = min(max(flank - (p0 - start), 0), contig_len - p0 - ref_len)
        return p0 - (flank - right), p0 + ref_len + right

    return span(ref_len), span(alt_len)


@dataclass(frozen=True)
class WindowPair:
    """The ref and alt windows of one variant and where its alleles sit in them."""

    ref: str
    alt: str
    ref_offset: int
    alt_offset: int
    ref_len: int
    alt_len: int
    #: 0-based reference start of the ref window (for reports; the alt window may start elsewhere
    #: only at a contig end)
    start: int = 0


def variant_windows(
    fetch: Callable[[int, int], str],
    p0: int,
    ref: str,
    alt: str,
    contig_len: int,
    window: int,
    grid: int = 1,
    limit: int | None = None,
) -> WindowPair | None:
    """The two windows of a variant by :func:`window_pair_bounds` (``None`` where it gives none);
    ``fetch(start, end)`` returns reference bases ``[start, end)``."""
    spans = window_pair_bounds(p0, len(ref), len(alt), contig_len, window, grid, limit)
    if spans is None:
        return None
    (rs, re_), (as_, ae) = spans
    ref_win = fetch(rs, re_)
    alt_win = fetch(as_, p0) + alt + fetch(p0 + len(ref), ae)
    return WindowPair(ref_win, alt_win, p0 - rs, p0 - as_, len(ref), len(alt), rs)


_NON_ACGT = re.compile("[^ACGTacgt]")


def _chunk_span(n: int, offset: int, length: int, k: int, rc: bool) -> tuple[int, int]:
    """Forward coordinates of the k-mer chunks of an ``n``-base window that hold
    ``[offset, offset + length)``; on the reverse strand chunks are laid from the window's end."""
    if not rc:
        return k * (offset // k), min(n, k * -(-(offset + length) // k))
    o = n - offset - length  # the same bases on the reverse-complemented window
    return max(0, n - k * -(-(o + length) // k)), n - k * (o // k)


def unscored_allele(pair: WindowPair, *, rc_average: bool = False, k: int = 6) -> str | None:
    """Why the variant's own bases are not scored (they share a k-mer with a non-ACGT base, so
    that k-mer is ``<oov>`` in the ref or the alt window, on a strand used), or ``None``."""
    strands = (False, True) if rc_average else (False,)
    for rc in strands:
        for which, seq, offset, length in (
            ("ref", pair.ref, pair.ref_offset, pair.ref_len),
            ("alt", pair.alt, pair.alt_offset, pair.alt_len),
        ):
            a, b = _chunk_span(len(seq), offset, length, k, rc)
            if _NON_ACGT.search(seq, a, b):
                strand = " (reverse strand)" if rc else ""
                return (
                    f"a non-ACGT reference base shares a {k}-mer with the variant: the {k}-mer{'s' if b - a > k else ''} "
                    f"{seq[a:b]!r} of the {which} window{strand} {'are' if b - a > k else 'is'} <oov>, so the "
                    "variant's bases would not be scored"
                )
    return None


def non_acgt_positions(seq: str) -> list[int]:
    """Offsets of the characters that make a k-mer ``<oov>`` (anything but A/C/G/T, either case)."""
    return [m.start() for m in _NON_ACGT.finditer(seq)]


def oov_bp(seq: str, k: int = 6, *, rc: bool = False) -> int:
    """Bases of ``<dna>seq`` inside ``<oov>`` k-mers (chunks holding a non-ACGT character); with
    ``rc`` of its reverse complement (chunks laid from the end)."""
    n = len(seq)
    hits = non_acgt_positions(seq)
    if not hits:
        return 0
    chunks = {((n - 1 - i) if rc else i) // k for i in hits}
    return sum(min(k, n - c * k) for c in chunks)


def pair_oov_bp(pair: WindowPair, *, rc_average: bool = False, k: int = 6) -> int:
    """The most bases lost to ``<oov>`` in any window of the pair (either strand when averaged)."""
    strands = (False, True) if rc_average else (False,)
    return max(oov_bp(seq, k, rc=rc) for seq in (pair.ref, pair.alt) for rc in strands)


def alt_window(ref_window: str, offset: int, ref: str, alt: str) -> str:
    """The ref window with ``ref`` (at ``offset``) replaced by ``alt``; both flanks kept."""
    return ref_window[:offset] + alt + ref_window[offset + len(ref) :]


def window_tokens(n_bases: int, k: int = 6) -> int:
    """Tokens of ``<dna>`` + a window of ``n_bases``."""
    return 1 + math.ceil(n_bases / k)


def naive_window_score(carbon: Carbon, ref_window: str, alt_win: str, *, rc_average: bool = False) -> float:
    """The window score by the book: one full forward per window (four with ``rc_average``)."""
    wins = [alt_win, ref_window]
    if rc_average:
        wins += [reverse_complement(alt_win), reverse_complement(ref_window)]
    return window_delta(*carbon.backend.window_log_likelihoods(wins))


def window_delta(
    alt_ll: float, ref_ll: float, rc_alt_ll: float | None = None, rc_ref_ll: float | None = None
) -> float:
    """``LL(alt) - LL(ref)``, averaged with the reverse strand's when its LLs are given."""
    delta = alt_ll - ref_ll
    if rc_alt_ll is not None and rc_ref_ll is not None:
        delta = (delta + (rc_alt_ll - rc_ref_ll)) / 2
    return delta


def window_ll(carbon: Carbon, seq: str) -> float:
    """LL of ``<dna>seq``: one full forward; FNS per-base log-probabilities summed in float64
    (``carbon.backend.window_log_likelihoods``).

    The same per-base terms as ``Carbon.score(seq, level="bp").per_base``, but the marginals are
    taken in float64: in float32 each term carries ~1e-6 of rounding (a logsumexp of ~7 minus
    another), which over an 8 kb window adds up to ~1e-4 in a difference of two LLs.
    """
    (ll,) = carbon.backend.window_log_likelihoods([seq])
    return float(ll)


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


def naive_next_base_scores(carbon: Carbon, context: str, ref: str, alts: Sequence[str]) -> list[float]:
    """``log P(ref) - log P(alt)`` for the base after ``context``: one context forward, by the book."""
    layout = carbon.layout
    if len(context) % layout.k:
        raise ValueError(f"context of {len(context)} bp is not a whole number of {layout.k}-mers")
    (first,) = carbon.backend.next_base_log_marginals([context])
    return next_base_scores(first, ref, alts)


def next_base_scores(first: torch.Tensor, ref: str, alts: Sequence[str]) -> list[float]:
    """``log P(ref) - log P(alt)`` from the next base's log-marginals (A, T, C, G order)."""
    return [float(first[BASE_INDEX[ref]] - first[BASE_INDEX[alt]]) for alt in alts]
