"""``hexamer bench report``'s inputs: real DNA, random SNVs with scores, bigWigs over the contig."""

from __future__ import annotations

from pathlib import Path

import pysam

from hexamer.bench.view_report import write_bench_inputs
from hexamer.view.files import classify


def test_inputs_are_what_a_report_reads(tmp_path: Path) -> None:
    fasta, vcf, tracks = write_bench_inputs(tmp_path, n_variants=20, n_tracks=1)
    assert classify(fasta).kind == "fasta" and classify(vcf).kind == "vcf"
    with pysam.VariantFile(str(vcf)) as f, pysam.FastaFile(str(fasta)) as fa:
        records = list(f)
        assert len(records) == 20
        for rec in records:
            assert fa.fetch(rec.chrom, rec.pos - 1, rec.pos).upper() == rec.ref
            assert rec.info["HEXAMER_STATUS"] == ("ok",) and len(rec.info["HEXAMER_SCORE"]) == 1
    import pyBigWig

    bw = pyBigWig.open(str(tracks[0]))
    assert bw.chroms() == {"human_chr20_2": 2_000_000}
    bw.close()
