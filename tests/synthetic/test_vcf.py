"""Random VCFs: valid for pysam, sorted, on A/C/G/T reference bases of the requested region."""

from __future__ import annotations

from pathlib import Path

import pysam
import pytest

from hexamer.synthetic.vcf import add_vcf_records, write_random_vcf
from tests.vep.conftest import EDGE_VCF, FASTA


def test_write_random_vcf_is_valid_and_on_the_reference(tmp_path: Path) -> None:
    vcf = tmp_path / "sites.vcf"
    n = write_random_vcf(FASTA, vcf, n_sites=25, alts_per_site=2, region=("20", 300_000, 310_000), seed=7)
    assert n == 25
    with pysam.VariantFile(str(vcf)) as source, pysam.FastaFile(str(FASTA)) as fasta:
        records = list(source)
        assert [r.pos for r in records] == sorted({r.pos for r in records})  # sorted, one record per site
        for r in records:
            assert r.chrom == "20" and 300_000 < r.pos <= 310_000
            assert r.ref == fasta.fetch("20", r.pos - 1, r.pos).upper() and r.ref in "ACGT"
            assert len(r.alts) == 2 and len(set(r.alts)) == 2 and r.ref not in r.alts
    again = tmp_path / "again.vcf"
    write_random_vcf(FASTA, again, n_sites=25, alts_per_site=2, region=("20", 300_000, 310_000), seed=7)
    assert again.read_text() == vcf.read_text()  # a seed gives the same file


def test_write_random_vcf_checks_its_numbers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="alts_per_site"):
        write_random_vcf(FASTA, tmp_path / "x.vcf", n_sites=1, alts_per_site=4)
    with pytest.raises(ValueError, match="fewer than n_sites"):
        write_random_vcf(FASTA, tmp_path / "x.vcf", n_sites=50, region=("20", 300_000, 300_010))
    assert not (tmp_path / "x.vcf").exists()


def test_add_vcf_records_appends_records_and_contigs(tmp_path: Path) -> None:
    vcf = tmp_path / "job.vcf"
    n = write_random_vcf(FASTA, vcf, n_sites=5, region=("20", 300_000, 310_000), seed=1)
    add_vcf_records(vcf, EDGE_VCF)
    edge = [line for line in EDGE_VCF.read_text().splitlines() if not line.startswith("#")]
    lines = vcf.read_text().splitlines()
    assert lines[-len(edge) :] == edge
    assert sum(1 for line in lines if not line.startswith("#")) == n + len(edge)
    contigs = [line for line in lines if line.startswith("##contig")]
    assert len(contigs) == len(set(contigs))  # the edge file's first contig (20) is not repeated
