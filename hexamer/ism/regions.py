"""Regions of a reference FASTA: ``chr:start-end`` text, checked against the FASTA's contigs.

Coordinates are 1-based and inclusive, as in samtools/tabix region strings; ``chr`` alone is the
whole contig. A bad region fails before any scoring with a message that names it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hexamer.io.reference import Reference

__all__ = ["MAX_REGION_BP", "Region", "RegionError", "merge_regions", "parse_region"]

#: The most bases one ISM run may hold (3 SNVs each, rows kept in memory): split longer regions.
MAX_REGION_BP = 100_000

_REGION = re.compile(r"^(?P<chrom>.+?)(?::(?P<start>[\d,_]+)(?:-(?P<end>[\d,_]+))?)?$")


class RegionError(ValueError):
    """A region that does not name bases of the FASTA (unknown contig, outside it, reversed, too long)."""


@dataclass(frozen=True)
class Region:
    """Bases ``[start, end)`` (0-based, half-open) of FASTA contig ``contig``; ``chrom`` is the
    name the user gave (kept in the output rows)."""

    chrom: str
    contig: str
    start: int
    end: int

    @property
    def length(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.chrom}:{self.start + 1}-{self.end}"


def _number(text: str, region: str) -> int:
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError as exc:
        raise RegionError(f"region {region!r}: {text!r} is not a position") from exc


def parse_region(text: str, reference: Reference, *, max_bp: int = MAX_REGION_BP) -> Region:
    """``chr:start-end`` (1-based, inclusive; ``chr:pos`` is one base, ``chr`` the whole contig)
    as a :class:`Region` of ``reference``; :class:`RegionError` names what is wrong."""
    text = text.strip()
    m = _REGION.match(text)
    if not text or m is None:
        raise RegionError(f"region {text!r} is not CHROM, CHROM:POS or CHROM:START-END")
    chrom = m["chrom"]
    if chrom not in reference.lengths and ":" in text and m["start"] is None:
        raise RegionError(f"region {text!r} is not CHROM, CHROM:POS or CHROM:START-END")
    contig, message = reference.resolve(chrom)
    if contig is None:
        shown = ", ".join(list(reference.lengths)[:8]) + (", ..." if len(reference.lengths) > 8 else "")
        raise RegionError(
            f"region {text!r}: {message}"
            if message
            else f"region {text!r}: no contig {chrom!r} in the FASTA (its contigs: {shown})"
        )
    length = reference.lengths[contig]
    start = _number(m["start"], text) if m["start"] is not None else 1
    end = _number(m["end"], text) if m["end"] is not None else (start if m["start"] is not None else length)
    if start < 1:
        raise RegionError(f"region {text!r}: start {start} is below 1 (positions are 1-based)")
    if end < start:
        raise RegionError(f"region {text!r}: end {end} is before start {start}")
    if end > length:
        raise RegionError(f"region {text!r}: end {end} is past the end of contig {contig!r} ({length:,} bp)")
    if end - start + 1 > max_bp:
        raise RegionError(
            f"region {text!r} holds {end - start + 1:,} bp, more than {max_bp:,}: split it into smaller regions"
        )
    return Region(chrom, contig, start - 1, end)


def merge_regions(regions: Iterable[Region], order: Mapping[str, int] | None = None) -> list[Region]:
    """Overlapping or touching regions of one contig merged (so each base is mutated once), in
    contig order (``order``: the FASTA's, e.g. ``Reference.order``; else by name), then position."""
    out: list[Region] = []
    rank = order or {}
    for r in sorted(regions, key=lambda r: (rank.get(r.contig, 0), r.contig, r.start, r.end)):
        last = out[-1] if out else None
        if last is not None and last.contig == r.contig and r.start <= last.end:
            out[-1] = Region(last.chrom, last.contig, last.start, max(last.end, r.end))
        else:
            out.append(r)
    return out
