"""Regions of a reference FASTA: ``chr20``, ``chr20:1-2000000`` (1-based, inclusive, commas
allowed), or every contig; checked against the FASTA before any model work."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Region", "RegionError", "parse_region", "parse_regions", "whole_reference"]

_SPAN = re.compile(r"^(?P<start>[\d,_]+)-(?P<end>[\d,_]+)$")


class RegionError(ValueError):
    """A region that cannot be read; the message names the region."""


@dataclass(frozen=True, order=True)
class Region:
    """``[start, end)`` of ``contig``, 0-based (``chr20:1-100`` is ``Region("chr20", 0, 100)``)."""

    contig: str
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.contig}:{self.start + 1}-{self.end}"


def parse_region(text: str, lengths: Mapping[str, int], resolve: object = None) -> Region:
    """One region against the FASTA's contig ``lengths``; ``resolve(name) -> (contig, note)``
    (optional) matches ``20`` to ``chr20`` as ``hexamer vep`` does."""
    raw = text.strip()
    if not raw:
        raise RegionError("region '': empty")
    name, span = raw, None
    if raw not in lengths and ":" in raw:
        name, _, span = raw.rpartition(":")
    contig = name if name in lengths else None
    if contig is None and callable(resolve):
        contig, _ = resolve(name)
    if contig is None:
        shown = ", ".join(list(lengths)[:8]) + (" ..." if len(lengths) > 8 else "")
        raise RegionError(f"region {text!r}: contig {name!r} is not in the FASTA (it has {shown})")
    length = lengths[contig]
    if span is None:
        if length == 0:
            raise RegionError(f"region {text!r}: contig {contig!r} is empty")
        return Region(contig, 0, length)
    m = _SPAN.match(span.strip())
    if m is None:
        raise RegionError(f"region {text!r}: expected CONTIG:START-END with 1-based positions, got {span!r}")
    start, end = (int(m.group(g).replace(",", "").replace("_", "")) for g in ("start", "end"))
    if start < 1 or end < start:
        raise RegionError(f"region {text!r}: need 1 <= START <= END, got {start:,}-{end:,}")
    if end > length:
        raise RegionError(f"region {text!r}: END {end:,} is past the end of {contig} ({length:,} bp)")
    return Region(contig, start - 1, end)


def parse_regions(texts: Iterable[str], lengths: Mapping[str, int], resolve: object = None) -> list[Region]:
    """Regions sorted in FASTA contig order then by start (the order bigWig needs); overlapping
    regions are refused (a base would get two values)."""
    order = {name: i for i, name in enumerate(lengths)}
    regions = sorted(
        (parse_region(t, lengths, resolve) for t in texts), key=lambda r: (order[r.contig], r.start, r.end)
    )
    for a, b in itertools.pairwise(regions):
        if a.contig == b.contig and b.start < a.end:
            raise RegionError(f"regions {a} and {b} overlap")
    return regions


def whole_reference(lengths: Mapping[str, int]) -> list[Region]:
    """Every non-empty contig, in FASTA order."""
    return [Region(name, 0, n) for name, n in lengths.items() if n > 0]
