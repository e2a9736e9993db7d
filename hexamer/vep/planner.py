"""Planning a block of VCF records: rows for what cannot be scored (with a status and a reason),
and deterministic work units for the rest (:mod:`~hexamer.vep.units`: window sites, next-base
groups, plain data) that a :class:`~hexamer.vep.units.UnitRunner` computes. Units depend only on
the input, never on what was already done, so a resumed run recomputes exactly what an
uninterrupted one computed. Units are packed by :func:`hexamer.engine.batching.padded_chunks`."""

from __future__ import annotations

from collections.abc import Callable

from hexamer.backend.protocol import Backend
from hexamer.engine.batching import padded_chunks
from hexamer.io.reference import Reference
from hexamer.io.vcf.records import Variant, VcfRecord
from hexamer.vep.recipes import (
    context_anchor,
    context_start,
    leading_n,
    window_bounds,
    window_pair_bounds,
    window_tokens,
)
from hexamer.vep.rows import Row, result_row
from hexamer.vep.settings import VepSettings
from hexamer.vep.units import NextBaseGroup, NextBaseUnit, WindowSite, WindowUnit, WorkUnit

__all__ = ["Planner"]


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

    def units(self, scorable: list[Variant]) -> list[WorkUnit]:
        """The units of a block's scorable variants, in reference order."""
        if self.s.recipe == "window":
            return list(self._window_units(scorable))
        return list(self._next_base_units(scorable))

    def _window_units(self, scorable: list[Variant]) -> list[WindowUnit]:
        members: dict[tuple[str, int, int], list[Variant]] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            start, end = window_bounds(
                v.start, len(v.ref), self.reference.lengths[contig], self.s.window, self.s.window_grid
            )
            members.setdefault((contig, start, end), []).append(v)
        order = self.reference.order
        sites = [
            WindowSite(*key, members=tuple(members[key]))
            for key in sorted(members, key=lambda c: (order[c[0]], c[1], c[2]))
        ]
        strands = 2 if self.s.rc_average else 1
        return [
            WindowUnit(tuple(chunk))
            for chunk in padded_chunks(
                sites,
                [window_tokens(site.max_bases(), self.k) for site in sites],
                rows=[strands * site.n_windows() for site in sites],
                token_budget=self.token_budget,
                max_rows=self.s.batch_size,
            )
        ]

    def _next_base_units(self, scorable: list[Variant]) -> list[NextBaseUnit]:
        groups: dict[tuple[str, int], dict[int, list[Variant]]] = {}
        for v in scorable:
            contig, _ = self.reference.resolve(v.chrom)
            assert contig is not None
            anchor = context_anchor(v.start, self.s.context, self.s.context_grid, self.k)
            start = context_start(anchor, v.start, self._leading_n(contig, anchor, v.start), self.k)
            groups.setdefault((contig, start), {}).setdefault(v.start, []).append(v)
        order = self.reference.order
        ordered = [
            NextBaseGroup(*key, sites={p: tuple(groups[key][p]) for p in sorted(groups[key])})
            for key in sorted(groups, key=lambda c: (order[c[0]], c[1]))
        ]
        n = self.s.batch_size
        return [NextBaseUnit(tuple(ordered[i : i + n])) for i in range(0, len(ordered), n)]

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
