"""The variants of saturation mutagenesis: every SNV of every base of a region (and, on request,
every 1-bp deletion and insertion), as in-memory VCF records the VEP engine scores.

Records are numbered so that their rows come out sorted by position (as tabix needs):

* the deletion of base ``p`` (0-based), VCF-anchored on the base before it: ``POS = p``,
  ``REF = seq[p-1:p+1]``, ``ALT = seq[p-1]`` (at the contig start it is anchored on the base
  after it, ``POS = 1``, ``REF = seq[0:2]``, ``ALT = seq[1]``);
* the three SNVs of base ``p``: ``POS = p + 1``, ALT in A, C, G, T order;
* the four insertions after base ``p``: ``POS = p + 1``, ``REF = seq[p]``, ``ALT = seq[p] + X``.

A base that is ``N`` gets four SNV rows (every base differs from it) that the engine skips with
the reason ``hexamer vep`` gives; another IUPAC code (R, Y, ...) is not a base to mutate from and
is skipped here with its own reason, before any scoring.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from hexamer.io.reference import Reference
from hexamer.io.vcf.records import VcfRecord
from hexamer.ism.regions import Region

__all__ = ["BASES", "IsmRecord", "ism_records"]

BASES = "ACGT"


@dataclass(frozen=True)
class IsmRecord:
    """A record to score, or the reason its base is not mutated (``skip``), with its region."""

    record: VcfRecord
    region: Region
    skip: str | None = None


def ism_records(
    reference: Reference, regions: list[Region], *, indels: bool = False, first_index: int = 0
) -> Iterator[IsmRecord]:
    """The records of every base of ``regions``, numbered from ``first_index`` in output order."""
    index = first_index
    for region in regions:
        length = reference.lengths[region.contig]
        lo, hi = max(0, region.start - 1), min(length, region.end + 1)
        seq = reference.fetch(region.contig, lo, hi)

        def base(p: int, seq: str = seq, lo: int = lo) -> str:
            return seq[p - lo]

        for p in range(region.start, region.end):
            b = base(p)
            if b not in BASES and b != "N":
                reason = (
                    f"reference base {b!r} at {region.chrom}:{p + 1} is an IUPAC ambiguity code, "
                    "not A/C/G/T: there is no base to mutate from"
                )
                alts = tuple(BASES)
                yield IsmRecord(VcfRecord(index, region.chrom, p + 1, "", b, alts), region, reason)
                index += 1
                continue
            if indels and length >= 2:
                if p > 0:
                    ref, alt, pos = base(p - 1) + b, base(p - 1), p
                else:  # no base before the contig start: anchor on the base after
                    ref, alt, pos = b + base(p + 1), base(p + 1), 1
                yield IsmRecord(VcfRecord(index, region.chrom, pos, "", ref, (alt,)), region)
                index += 1
            alts = tuple(x for x in BASES if x != b)
            yield IsmRecord(VcfRecord(index, region.chrom, p + 1, "", b, alts), region)
            index += 1
            if indels:
                yield IsmRecord(
                    VcfRecord(index, region.chrom, p + 1, "", b, tuple(b + x for x in BASES)), region
                )
                index += 1
