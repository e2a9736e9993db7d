"""The model work of VEP units, on any :class:`~hexamer.backend.protocol.Backend`.

* **Window recipe.** All windows of one site (the ref window and every alt window of every
  record at that position) agree up to the 6-mer holding the first changed base. On a backend
  that ``supports_kv_sharing``, that shared prefix is run once, its KV cache shared by one row per
  window (a block-table fork: the prefix's blocks are stored once), and only the differing suffixes are run, batched across sites
  (:meth:`~hexamer.backend.protocol.PrefixSharingBackend.shared_prefix_log_likelihoods`). Only
  the suffix's per-base log-probabilities enter the score: the prefix's are the same in every
  window and cancel in ``LL(alt) - LL(ref)``.
* **Next-base recipe.** Every site of a group reads its next-base distribution from one causal
  forward over the group's sequence
  (:meth:`~hexamer.backend.protocol.PrefixSharingBackend.next_base_log_marginals_at`).

Elsewhere (a served model, or ``naive=True``) each window and each context is one request or
forward, as the recipes define them (:mod:`hexamer.vep.recipes`); a remote backend sends them
concurrently.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from hexamer.backend.protocol import Backend, PrefixSharingBackend
from hexamer.io import reverse_complement
from hexamer.io.reference import Reference
from hexamer.io.vcf.records import Variant
from hexamer.vep.recipes import (
    WindowPair,
    next_base_scores,
    non_acgt_positions,
    oov_bp,
    pair_oov_bp,
    unscored_allele,
    variant_windows,
    window_delta,
)
from hexamer.vep.rows import Row, result_row
from hexamer.vep.settings import VepSettings
from hexamer.vep.units import NextBaseGroup, NextBaseUnit, WindowSite, WindowUnit, WorkUnit

__all__ = ["Runner", "site_pairs", "window_pair_scores"]


def _same(x: str) -> str:
    return x


def site_pairs(
    site: WindowSite, reference: Reference, window: int, grid: int, limit: int
) -> list[WindowPair | None]:
    """Each member's ref and alt windows (:func:`~hexamer.vep.recipes.variant_windows`: an
    indel's windows reach up to its length difference beyond ``[start, end)``), from one fetch."""
    length = reference.lengths[site.contig]
    reach = max(abs(len(v.alt) - len(v.ref)) for v in site.members)
    lo, hi = max(0, site.start - reach), min(length, site.end + reach)
    seq = reference.fetch(site.contig, lo, hi)

    def fetch(a: int, b: int) -> str:
        assert lo <= a <= b <= hi
        return seq[a - lo : b - lo]

    return [variant_windows(fetch, v.start, v.ref, v.alt, length, window, grid, limit) for v in site.members]


def window_pair_scores(
    backend: Backend,
    sites: Sequence[Sequence[WindowPair]],
    *,
    rc_average: bool = False,
    batch_size: int = 8,
    token_budget: int = 4096,
    naive: bool = False,
) -> list[list[float]]:
    """The window score ``LL(alt) - LL(ref)`` of every pair, site by site (a site: pairs that
    share a ref window, so their windows share a prefix); with ``rc_average`` averaged with the
    reverse strand's. The shared-prefix scorer where the backend ``supports_kv_sharing`` (and not
    ``naive``), else one window LL per distinct window."""
    strands: list[Callable[[str], str]] = [_same, reverse_complement] if rc_average else [_same]
    if naive or not backend.supports_kv_sharing:
        wins = list(
            dict.fromkeys(f(x) for site in sites for p in site for x in (p.alt, p.ref) for f in strands)
        )
        ll = dict(zip(wins, backend.window_log_likelihoods(wins), strict=True))
        return [
            [window_delta(*(ll[f(x)] for f in strands for x in (p.alt, p.ref))) for p in site]
            for site in sites
        ]
    fast = cast(PrefixSharingBackend, backend)
    groups: list[list[str]] = []
    for site in sites:
        strings = list(dict.fromkeys(x for p in site for x in (p.ref, p.alt)))
        groups.extend([[flip(x) for x in strings] for flip in strands])
    sums = fast.shared_prefix_log_likelihoods(groups, batch_size=batch_size, token_budget=token_budget)
    out: list[list[float]] = []
    g = 0
    for site in sites:
        tables = []
        for flip in strands:
            tables.append((flip, dict(zip(groups[g], sums[g], strict=True))))
            g += 1
        deltas = [[table[flip(p.alt)] - table[flip(p.ref)] for flip, table in tables] for p in site]
        out.append([sum(d) / len(d) for d in deltas])
    return out


class Runner:
    """Model work for the units (a :class:`~hexamer.vep.units.UnitRunner`): the shared-prefix
    scorers, or the recipes one window or context at a time (``naive=True``, or a backend without
    ``supports_kv_sharing``). A subclass may score windows otherwise (a fine-tuned head,
    :class:`hexamer.finetune.effects.EffectRunner`) by overriding :meth:`window_scores` and
    :meth:`ok_row`."""

    def __init__(self, backend: Backend, reference: Reference, settings: VepSettings, naive: bool) -> None:
        self.backend = backend
        self.reference = reference
        self.s = settings
        self.naive = naive or not backend.supports_kv_sharing
        assert settings.token_budget is not None, "run with VepSettings.checked() settings"
        self.token_budget: int = settings.token_budget
        self.layout = backend.layout
        self.limit = self.layout.k * (backend.max_prompt_tokens - 1)
        #: group sequences fetched by next_base_logprobs, reused to count their <oov> bases
        self._group_seqs: dict[tuple[str, int, int], str] = {}

    def run(self, unit: WorkUnit) -> list[Row]:
        """The rows of one unit (one per variant), by its kind."""
        if isinstance(unit, WindowUnit):
            return self.window(unit.sites)
        if isinstance(unit, NextBaseUnit):
            return self.next_base(unit.groups)
        raise TypeError(f"not a VEP work unit: {unit!r}")

    # ------------------------------------------------------------ window
    def window(self, sites: Sequence[WindowSite]) -> list[Row]:
        recipe, rc, k = self.s.recipe, self.s.rc_average, self.layout.k
        out: list[Row] = []
        todo: list[tuple[int, Variant, WindowPair, int]] = []  # (site, variant, windows, oov bases)
        for si, site in enumerate(sites):
            pairs = site_pairs(site, self.reference, self.s.window, self.s.window_grid, self.limit)
            for v, pair in zip(site.members, pairs, strict=True):
                if pair is None:  # the planner skips these; kept for callers that bypass it
                    out.append(
                        result_row(v, recipe, "skipped", reason="contig too short for equal-length windows")
                    )
                    continue
                n_oov = pair_oov_bp(pair, rc_average=rc, k=k)
                counts = {"n_scored_bp": len(pair.ref) - n_oov, "n_oov_bp": n_oov}
                reason = unscored_allele(pair, rc_average=rc, k=k)
                if reason is not None:
                    out.append(result_row(v, recipe, "skipped", reason=reason, **counts))
                else:
                    todo.append((si, v, pair, n_oov))
        if not todo:
            return out
        by_site: dict[int, list[tuple[Variant, WindowPair, int]]] = {}
        for si, v, pair, n_oov in todo:
            by_site.setdefault(si, []).append((v, pair, n_oov))
        members = list(by_site.values())
        scores = self.window_scores([[p for _, p, _ in site] for site in members])
        for site, site_scores in zip(members, scores, strict=True):
            for (v, pair, n_oov), score in zip(site, site_scores, strict=True):
                out.append(self.ok_row(v, score, n_scored_bp=len(pair.ref) - n_oov, n_oov_bp=n_oov))
        return out

    def ok_row(self, v: Variant, value: Any, *, n_scored_bp: int, n_oov_bp: int) -> Row:
        """The row of a scored variant from what :meth:`window_scores` gave it (here its score; a
        scorer that gives more, e.g. one value per output of a fine-tuned head, says how they fill
        the row)."""
        return result_row(v, self.s.recipe, "ok", value, n_scored_bp=n_scored_bp, n_oov_bp=n_oov_bp)

    def window_scores(self, sites: list[list[WindowPair]]) -> list[list[Any]]:
        return window_pair_scores(
            self.backend,
            sites,
            rc_average=self.s.rc_average,
            batch_size=self.s.batch_size,
            token_budget=self.token_budget,
            naive=self.naive,
        )

    # ------------------------------------------------------------ next base
    def next_base(self, groups: Sequence[NextBaseGroup]) -> list[Row]:
        recipe = self.s.recipe
        out: list[Row] = []
        if self.naive:
            contexts = {
                (g.contig, g.start, p0): self.reference.fetch(g.contig, g.start, p0)
                for g in groups
                for p0 in g.sites
            }
            firsts = dict(
                zip(contexts, self.backend.next_base_log_marginals(list(contexts.values())), strict=True)
            )
            for g in groups:
                for p0 in sorted(g.sites):
                    ctx = contexts[(g.contig, g.start, p0)]
                    n_oov = oov_bp(ctx, self.layout.k)
                    counts = {"n_scored_bp": len(ctx) - n_oov, "n_oov_bp": n_oov}
                    for v in g.sites[p0]:
                        (score,) = next_base_scores(firsts[(g.contig, g.start, p0)], v.ref, [v.alt])
                        out.append(result_row(v, recipe, "ok", score, **counts))
            return out
        firsts_per_group = self.next_base_logprobs(groups)
        for g, per_site in zip(groups, firsts_per_group, strict=True):
            oov = self._context_oov(g)
            for p0, lp in zip(sorted(g.sites), per_site, strict=True):
                counts = {"n_scored_bp": p0 - g.start - oov[p0], "n_oov_bp": oov[p0]}
                for v in g.sites[p0]:
                    (score,) = next_base_scores(lp, v.ref, [v.alt])
                    out.append(result_row(v, recipe, "ok", score, **counts))
        return out

    def _context_oov(self, g: NextBaseGroup) -> dict[int, int]:
        """``<oov>`` bases of each site's context ``[g.start, p0)`` (whole k-mers: sites sit on the
        group's k-mer grid), from one scan of the group's sequence."""
        k = self.layout.k
        last = max(g.sites)
        seq = self._group_seqs.pop((g.contig, g.start, last), None)  # left by next_base_logprobs
        if seq is None:
            seq = self.reference.fetch(g.contig, g.start, last)
        chunks = sorted({i // k for i in non_acgt_positions(seq)})
        return {p0: k * bisect.bisect_left(chunks, (p0 - g.start) // k) for p0 in g.sites}

    def next_base_logprobs(self, groups: Sequence[NextBaseGroup]) -> list[list[torch.Tensor]]:
        """Per group, per site (ascending): float64 ``log P_0(b)`` (ATCG order) of the base at the
        site, every site of a group from one forward over ``[start, last site)``."""
        fast = cast(PrefixSharingBackend, self.backend)
        result: list[list[torch.Tensor]] = []
        self._group_seqs = {}
        for g in groups:
            positions = sorted(g.sites)
            seq = self.reference.fetch(g.contig, g.start, positions[-1])
            self._group_seqs[(g.contig, g.start, positions[-1])] = seq
            result.append(fast.next_base_log_marginals_at(seq, [p - g.start for p in positions]))
        return result
