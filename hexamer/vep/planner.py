"""Planning a block of VCF records: rows for what cannot be scored (with a status and a reason),
and deterministic work units for the rest (window sites, next-base groups) that
:class:`~hexamer.vep.runner.Runner` computes. Units depend only on the input, never on what was
already done, so a resumed run recomputes exactly what an uninterrupted one computed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hexamer.model.finite import non_finite_output
from hexamer.vep.recipes import (
    WindowPair,
    context_anchor,
    context_start,
    leading_n,
    variant_windows,
    window_bounds,
    window_pair_bounds,
    window_tokens,
)
from hexamer.vep.settings import VepSettings
from hexamer.vep.variants import Reference, Variant, VcfRecord

if TYPE_CHECKING:
    from hexamer.backend.protocol import Backend
    from hexamer.vep.runner import Runner

__all__ = ["Key", "NextBaseGroup", "Planner", "Row", "WindowSite", "WorkUnit", "result_row"]

Row = dict[str, Any]
Key = tuple[int, int]


def result_row(
    v: Variant,
    recipe: str,
    status: str,
    score: float | None = None,
    reason: str | None = None,
    *,
    n_scored_bp: int | None = None,
    n_oov_bp: int | None = None,
) -> Row:
    """One output row; an ``ok`` score that is not a finite number (the model's output was NaN or
    infinite) makes the row ``failed`` with the reason, so no row is ``ok`` without a number."""
    if status == "ok" and (score is None or not math.isfinite(score)):
        status, score, reason = "failed", None, non_finite_output("score")
    return {
        "record": v.record,
        "alt_index": v.alt_index,
        "id": v.id,
        "chrom": v.chrom,
        "pos": v.pos,
        "ref": v.ref,
        "alt": v.alt,
        "kind": v.kind,
        "recipe": recipe,
        "score": score,
        "status": status,
        "reason": reason,
        "n_scored_bp": n_scored_bp,
        "n_oov_bp": n_oov_bp,
    }


# --------------------------------------------------------------------------- planning


@dataclass
class WindowSite:
    """Variants sharing one ref window ``[start, end)`` of a FASTA contig (sequences are fetched
    when the unit runs, so a planned block holds coordinates, not megabases of windows)."""

    contig: str
    start: int
    end: int
    members: list[Variant] = field(default_factory=list)

    def pairs(self, reference: Reference, window: int, grid: int, limit: int) -> list[WindowPair | None]:
        """Each member's ref and alt windows (:func:`~hexamer.vep.recipes.variant_windows`: an
        indel's windows reach up to its length difference beyond ``[start, end)``)."""
        length = reference.lengths[self.contig]
        reach = max(abs(len(v.alt) - len(v.ref)) for v in self.members)
        lo, hi = max(0, self.start - reach), min(length, self.end + reach)
        seq = reference.fetch(self.contig, lo, hi)

        def fetch(a: int, b: int) -> str:
            assert lo <= a <= b <= hi
            return seq[a - lo : b - lo]

        return [
            variant_windows(fetch, v.start, v.ref, v.alt, length, window, grid, limit) for v in self.members
        ]

    def n_windows(self) -> int:
        return 1 + len({(v.start, v.ref, v.alt) for v in self.members})

    def max_bases(self) -> int:
        return self.end - self.start + max(0, *(len(v.alt) - len(v.ref) for v in self.members))


@dataclass
class NextBaseGroup:
    """Sites whose contexts start at the same base (so share a prefix), by position."""

    contig: str
    start: int
    sites: dict[int, list[Variant]] = field(default_factory=dict)  # p0 -> variants


@dataclass
class WorkUnit:
    """One deterministic piece of work and the variants whose rows it produces."""

    variants: list[Variant]
    run: Callable[[], list[Row]]

    @property
    def keys(self) -> list[Key]:
        return [v.key for v in self.variants]


class Planner:
    """Turns a block of records into rows for what cannot be scored and units for the rest."""

    def __init__(
        self, backend: Backend, reference: Reference, settings: VepSettings, note: Callable[[str], None]
    ):
        self.reference = reference
        self.s = settings
        assert settings.token_budget is not None, "plan with VepSettings.checked() settings"
        self.token_budget: int = settings.token_budget
        self.note = note
        self.k = backend.layout.k
        self.positions: int = backend.max_prompt_tokens
        #: the most bases a window may hold (``<dna>`` + whole k-mers within the model's context)
        self.limit = self.k * (self.positions - 1)
        self._noted: set[str] = set()
        self._lead: dict[tuple[str, int], tuple[int, int]] = {}

    def plan(self, block: list[VcfRecord]) -> tuple[list[Row], list[Variant]]:
        rows: list[Row] = []
        scorable: list[Variant] = []
        recipe = self.s.recipe
        for rec in block:
            ref_check: dict[str, str | None] = {}
            for v in rec.variants():
                if v.error is not None:
                    rows.append(result_row(v, recipe, "failed", reason=v.error))
                    continue
                if v.skip is not None:
                    rows.append(result_row(v, recipe, "skipped", reason=v.skip))
                    continue
                contig, message = self.reference.resolve(v.chrom)
                if contig is None:
                    rows.append(result_row(v, recipe, "skipped", reason=message))
                    continue
                if message is not None and v.chrom not in self._noted:
                    self._noted.add(v.chrom)
                    self.note(message)
                if contig not in ref_check:
                    ref_check[contig] = self._ref_problem(v, contig)
                if ref_check[contig] is not None:
                    rows.append(result_row(v, recipe, "ref_mismatch", reason=ref_check[contig]))
                    continue
                skip = self._recipe_skip(v, contig)
                if skip is not None:
                    rows.append(result_row(v, recipe, "skipped", reason=skip))
                    continue
                scorable.append(v)
        return rows, scorable

    def _ref_problem(self, v: Variant, contig: str) -> str | None:
        length = self.reference.lengths[contig]
        end = v.start + len(v.ref)
        if end > length:
            return (
                f"REF {v.ref} at {v.chrom}:{v.pos} runs past the end of FASTA contig {contig!r} ({length} bp)"
            )
        found = self.reference.fetch(contig, v.start, end)
        if found != v.ref:
            return f"REF {v.ref} at {v.chrom}:{v.pos} does not match the FASTA ({found})"
        return None

    def _recipe_skip(self, v: Variant, contig: str) -> str | None:
        if "N" in v.ref or "N" in v.alt:
            return "allele contains N: its 6-mer would be <oov> and its bases not scored"
        if self.s.recipe == "next_base":
            if v.kind != "SNV":
                return f"the next_base recipe scores SNVs only (this is a {v.kind})"
            return None
        length = self.reference.lengths[contig]
        if window_tokens(max(len(v.ref), len(v.alt)), self.k) > self.positions:
            return f"its allele needs more tokens than the model's context of {self.positions}"
        spans = window_pair_bounds(
            v.start, len(v.ref), len(v.alt), length, self.s.window, self.s.window_grid, self.limit
        )
        if spans is None:
            return (
                f"contig {contig!r} ({length} bp) is too short to give this indel's ref and alt windows "
                "the same number of bases"
            )
        return None

    # ---------------------------------------------------------------- units

    def units(self, scorable: list[Variant], runner: Runner) -> list[WorkUnit]:
        if self.s.recipe == "window":
            return self._window_units(scorable, runner)
        return self._next_base_units(scorable, runner)

    def _window_units(self, scorable: list[Variant], runner: Runner) -> list[WorkUnit]:
        sites: dict[tuple[str, int, int], WindowSite] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            start, end = window_bounds(
                v.start, len(v.ref), self.reference.lengths[contig], self.s.window, self.s.window_grid
            )
            site = sites.get((contig, start, end))
            if site is None:
                site = sites[(contig, start, end)] = WindowSite(contig, start, end)
            site.members.append(v)
        order = self.reference.order
        ordered = [sites[key] for key in sorted(sites, key=lambda c: (order[c[0]], c[1], c[2]))]
        strands = 2 if self.s.rc_average else 1
        units: list[WorkUnit] = []
        batch: list[WindowSite] = []
        rows = 0
        for site in ordered:
            n = strands * site.n_windows()
            tokens = window_tokens(site.max_bases(), self.k)
            if batch and (rows + n > self.s.batch_size or (rows + n) * tokens > self.token_budget):
                units.append(self._window_unit(batch, runner))
                batch, rows = [], 0
            batch.append(site)
            rows += n
        if batch:
            units.append(self._window_unit(batch, runner))
        return units

    def _window_unit(self, sites: list[WindowSite], runner: Runner) -> WorkUnit:
        return WorkUnit([v for site in sites for v in site.members], lambda: runner.window(sites))

    def _next_base_units(self, scorable: list[Variant], runner: Runner) -> list[WorkUnit]:
        groups: dict[tuple[str, int], NextBaseGroup] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            anchor = context_anchor(v.start, self.s.context, self.s.context_grid, self.k)
            start = context_start(anchor, v.start, self._leading_n(contig, anchor, v.start), self.k)
            group = groups.get((contig, start))
            if group is None:
                group = groups[(contig, start)] = NextBaseGroup(contig, start)
            group.sites.setdefault(v.start, []).append(v)
        order = self.reference.order
        ordered = [groups[key] for key in sorted(groups, key=lambda c: (order[c[0]], c[1]))]
        units = [
            self._next_base_unit(ordered[i : i + self.s.batch_size], runner)
            for i in range(0, len(ordered), self.s.batch_size)
        ]
        return units

    def _leading_n(self, contig: str, anchor: int, p0: int) -> int:
        """N bases at the anchor, counted up to ``p0`` (cached per anchor; most anchors have none)."""
        key = (contig, anchor)
        hit = self._lead.get(key)
        if hit is not None:
            n, upto = hit
            if n < upto - anchor or upto >= p0:  # the run ended before `upto`, or `upto` covers p0
                return min(n, p0 - anchor)
        if anchor >= p0 or self.reference.fetch(contig, anchor, anchor + 1) != "N":
            n = 0
        else:
            n = leading_n(self.reference.fetch(contig, anchor, p0))
        self._lead[key] = (n, p0)
        return n

    def _next_base_unit(self, groups: list[NextBaseGroup], runner: Runner) -> WorkUnit:
        variants = [v for g in groups for p in sorted(g.sites) for v in g.sites[p]]
        return WorkUnit(variants, lambda: runner.next_base(groups))
