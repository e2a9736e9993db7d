"""The contig survey reads a VCF's header before a job and takes its counts from the job after."""

from __future__ import annotations

import gzip
from pathlib import Path

import pysam

from hexamer.io.reference import Reference
from hexamer.io.vcf.contig_survey import survey_contigs
from hexamer.io.vcf.reader import declared_contigs

DATA = Path(__file__).resolve().parents[2] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
VCF = DATA / "chr20_slice.vcf"


def test_declared_contigs_read_the_header_of_every_kind_of_input(tmp_path: Path) -> None:
    plain_gz = tmp_path / "a.vcf.gz"
    plain_gz.write_bytes(gzip.compress(VCF.read_bytes()))
    bgz = str(tmp_path / "b.vcf.gz")
    pysam.tabix_compress(str(VCF), bgz)
    bcf = tmp_path / "c.bcf"
    with pysam.VariantFile(str(VCF)) as vf, pysam.VariantFile(str(bcf), "wb", header=vf.header) as out:
        for rec in vf:
            out.write(rec)
    for path in (VCF, plain_gz, bgz, bcf):
        assert declared_contigs(path) == ["20"], path


def test_survey_before_and_after_a_job() -> None:
    with Reference(FASTA) as reference:
        before = survey_contigs(VCF, reference)
        assert before.records == {"20": 0} and before.n_records == 0 and not before.mostly_unmatched()
        after = survey_contigs(VCF, reference, {"20": 3, "chrUn": 5})
    assert after.n_records == 8 and after.unmatched == {"chrUn": 5} and after.mostly_unmatched()
    assert "chrUn (5 records)" in after.summary()
