"""The committed files of tests/data/view (made by hexamer on a tiny model; see its README)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
VIEW = DATA / "view"
FASTA = DATA / "vep" / "chr20_slice.fa.gz"  # contig "20", bgzip + .fai + .gzi
LOGO = [VIEW / f"prob_{b}.bw" for b in "ACGT"]
TRACKS = [*LOGO, VIEW / "entropy.bw", VIEW / "scored.vcf.gz", VIEW / "ism.tsv.bgz", VIEW / "regions.bed"]
