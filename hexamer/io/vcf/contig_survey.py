"""Before a job starts: how many VCF records will find their contig in the reference FASTA."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from hexamer.io.contigs import ContigResolution
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import iter_data_lines, open_variant_file

__all__ = ["ContigSurvey", "survey_contigs"]

PathLike = str | os.PathLike[str]


@dataclass
class ContigSurvey:
    """How the contigs named by a VCF's records resolve against a FASTA, read before a job starts.

    ``records`` counts data lines per VCF contig (first-seen order), ``resolutions`` says where
    each contig points; :meth:`notes` and :meth:`summary` put it in words for a console.
    """

    n_records: int
    records: dict[str, int]
    resolutions: dict[str, ContigResolution]
    fasta_contigs: list[str]

    @property
    def unmatched(self) -> dict[str, int]:
        """VCF contigs with no FASTA contig, and their record counts."""
        return {c: n for c, n in self.records.items() if self.resolutions[c].contig is None}

    @property
    def n_unmatched(self) -> int:
        return sum(self.unmatched.values())

    @property
    def renamed(self) -> dict[str, str]:
        """VCF contigs read from a differently named FASTA contig (renames and aliases)."""
        return {c: str(r.contig) for c, r in self.resolutions.items() if r.how in ("renamed", "alias")}

    def mostly_unmatched(self, fraction: float = 0.5) -> bool:
        """More than ``fraction`` of the records name a contig the FASTA lacks."""
        return self.n_records > 0 and self.n_unmatched > fraction * self.n_records

    def notes(self) -> list[str]:
        """One line for the renames used and one per ambiguous contig."""
        lines = []
        renamed = self.renamed
        if renamed:
            pairs = ", ".join(f"{old} -> {new}" for old, new in renamed.items())
            lines.append(f"contig names: VCF -> FASTA {pairs}")
        lines += [
            str(r.message)
            for c, r in self.resolutions.items()
            if r.how == "ambiguous" and r.message is not None
        ]
        return lines

    def summary(self) -> str:
        """What is missing on each side, for a job that skipped most of its records."""
        missing = self.unmatched
        share = self.n_unmatched / max(1, self.n_records)
        shown = ", ".join(f"{c} ({n} record{'s' if n != 1 else ''})" for c, n in list(missing.items())[:8])
        fasta = ", ".join(self.fasta_contigs[:8]) + (
            f", ... ({len(self.fasta_contigs)} in all)" if len(self.fasta_contigs) > 8 else ""
        )
        return (
            f"{self.n_unmatched} of {self.n_records} records ({share:.0%}) name a contig the FASTA does "
            f"not have, and were skipped. VCF contigs not found: {shown}"
            f"{', ...' if len(missing) > 8 else ''}. FASTA contigs: {fasta}. If these are the same "
            "sequences under other names, map them with a rename table (--rename-chrs FILE: two "
            "columns, VCF name then FASTA name)."
        )


def _record_contigs(path: str) -> Iterator[str]:
    """The CHROM of every data line (text VCF: read as bytes, no parsing) or record (BCF)."""
    with open_variant_file(path) as vf:
        is_text = vf.format == "VCF"
        if not is_text:
            import pysam

            old = pysam.set_verbosity(0)
            try:
                it = iter(vf)
                while True:
                    try:
                        rec = next(it)
                    except StopIteration:
                        return
                    except (OSError, ValueError):
                        continue
                    try:
                        yield rec.chrom
                    except UnicodeDecodeError:
                        continue
            finally:
                pysam.set_verbosity(old)
    for raw in iter_data_lines(path):
        if not raw.strip() or raw.startswith(b"#"):
            continue
        yield raw.split(b"\t", 1)[0].strip().decode("utf-8", "replace")


def survey_contigs(vcf: PathLike, reference: Reference) -> ContigSurvey:
    """Count the records per VCF contig and resolve each contig against ``reference``.

    One pass over the VCF that parses nothing but CHROM (fast next to scoring); a file that cannot
    be read raises :class:`VcfInputError` as :func:`read_vcf` does.
    """
    counts: dict[str, int] = {}
    for chrom in _record_contigs(os.fspath(vcf)):
        counts[chrom] = counts.get(chrom, 0) + 1
    return ContigSurvey(
        n_records=sum(counts.values()),
        records=counts,
        resolutions={c: reference.resolver.resolve(c) for c in counts},
        fasta_contigs=list(reference.lengths),
    )
