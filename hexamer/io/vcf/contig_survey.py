"""How the contigs a VCF names resolve against a reference FASTA: from its header before a job
(no record is read), from the records a job read after it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from hexamer.io.contigs import ContigResolution
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import declared_contigs

__all__ = ["ContigSurvey", "survey_contigs"]

PathLike = str | os.PathLike[str]


@dataclass
class ContigSurvey:
    """How the contigs named by a VCF resolve against a FASTA.

    ``records`` counts records per VCF contig (first-seen order; 0 where they were not counted),
    ``resolutions`` says where each contig points; :meth:`notes` and :meth:`summary` put it in
    words for a console.
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


def survey_contigs(
    vcf: PathLike, reference: Reference, records: Mapping[str, int] | None = None
) -> ContigSurvey:
    """How the contigs of ``vcf`` resolve against ``reference``, without reading its records.

    Before a job, ``records`` is ``None``: the contigs are those its header declares
    (``##contig`` lines), each counted 0 (so the renames and ambiguous names can be said before
    any scoring, and no count is guessed). After a job,
    ``records`` are the records per contig that the job read (its
    :attr:`~hexamer.vep.job.VepRunResult.contig_records`), in first-seen order. A file that
    cannot be read raises :class:`VcfInputError` as :func:`read_vcf` does.
    """
    counts = dict.fromkeys(declared_contigs(vcf), 0) if records is None else dict(records)
    return ContigSurvey(
        n_records=sum(counts.values()),
        records=counts,
        resolutions={c: reference.resolver.resolve(c) for c in counts},
        fasta_contigs=list(reference.lengths),
    )
