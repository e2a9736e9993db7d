"""Variants from VCF/BCF files and their reference bases from FASTA.

A variant-effect job over a large VCF must not die on one odd record, so the problems are split
the same way as in :mod:`hexamer.io`:

* a bad *file* (missing, not VCF/BCF, a header htslib cannot parse, a FASTA that cannot be
  indexed) raises :class:`VcfInputError` / :class:`FastaError` naming the path;
* a bad *record* (a line htslib cannot parse, a position below 1 or past htslib's 62-bit limit,
  a field with bytes that are not UTF-8, a REF/ALT with characters that are not nucleotides) comes
  out as a :class:`VcfRecord` with ``problem`` set, in input order, and reading goes on.

Contig names are matched to the FASTA's by :mod:`hexamer.io.contigs` (renames, ``chr1``/``1``,
NCBI accessions); :func:`survey_contigs` tells before a job starts how many records will find
their contig.

Every record yields one :class:`Variant` per ALT allele (``alt_index`` 0, 1, ...), so a
multi-allelic record becomes several variants that keep their record index. For plain and gzipped
VCF text the raw lines are read alongside pysam, so a malformed record is reported with its line
number and whatever CHROM/POS/ID could be read from it.

The parts live in :mod:`~hexamer.vep.records` (:class:`Variant`, :class:`VcfRecord`,
:func:`classify`), :mod:`~hexamer.vep.vcf_reader` (:func:`read_vcf`),
:mod:`~hexamer.io.reference` (:class:`Reference`) and :mod:`~hexamer.vep.contig_survey`
(:func:`survey_contigs`); this module names them all.
"""

from __future__ import annotations

from hexamer.io.fasta import FastaError
from hexamer.io.reference import Reference
from hexamer.vep.contig_survey import ContigSurvey, survey_contigs
from hexamer.vep.records import KINDS, Variant, VcfRecord, classify
from hexamer.vep.vcf_reader import MAX_VCF_POS, VcfInputError, iter_data_lines, open_variant_file, read_vcf

__all__ = [
    "KINDS",
    "MAX_VCF_POS",
    "ContigSurvey",
    "FastaError",
    "Reference",
    "Variant",
    "VcfInputError",
    "VcfRecord",
    "classify",
    "iter_data_lines",
    "open_variant_file",
    "read_vcf",
    "survey_contigs",
]
