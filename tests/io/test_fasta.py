"""Reference FASTA preparation: what htslib's faidx refuses is either read anyway or named."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pysam
import pytest

from hexamer.io.fasta import FastaError, fasta_compression, prepare_fasta

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
SAUREUS = DATA / "saureus_nctc8325_slice.fa.gz"


def _fetch_all(path: Path) -> dict[str, str]:
    prepared = prepare_fasta(path)
    with pysam.FastaFile(
        prepared.path, filepath_index=prepared.fai, filepath_index_compressed=prepared.gzi
    ) as fa:
        return {name: fa.fetch(name) for name in fa.references}


def _records(path: Path) -> dict[str, str]:
    """The records as pysam's sequential FASTA reader sees them (no index involved)."""
    with pysam.FastxFile(str(path)) as fx:
        return {rec.name: rec.sequence for rec in fx}


def test_plain_gzip_fasta_is_read_like_its_bgzip_copy(tmp_path: Path) -> None:
    """The real S. aureus NCTC 8325 FASTA ships as plain gzip, NCBI header and all."""
    assert fasta_compression(SAUREUS) == "gzip"
    got = _fetch_all(SAUREUS)
    assert list(got) == ["gi|88193823|ref|NC_007795.1|"]
    assert got == _records(SAUREUS)
    assert len(got["gi|88193823|ref|NC_007795.1|"]) == 48_000
    bgz = tmp_path / "s.fa.gz"
    plain = tmp_path / "s.fa"
    plain.write_bytes(gzip.decompress(SAUREUS.read_bytes()))
    pysam.tabix_compress(str(plain), str(bgz))
    assert fasta_compression(bgz) == "bgzf" and _fetch_all(bgz) == got
    assert prepare_fasta(SAUREUS).note is not None and "plain gzip" in (prepare_fasta(SAUREUS).note or "")


def test_ragged_line_lengths_are_valid_fasta(tmp_path: Path) -> None:
    fa = tmp_path / "ragged.fa"
    fa.write_text(">a desc\nACGTAC\nACG\nACGTACGT\n\n>b\nGG\nG\n>c\nTTTT\n")
    with pytest.raises(pysam.SamtoolsError):  # what htslib alone makes of it
        pysam.faidx(str(fa), "--fai-idx", str(tmp_path / "x.fai"))
    prepared = prepare_fasta(fa)
    assert prepared.note is not None and "unequal length" in prepared.note
    assert _fetch_all(fa) == {"a": "ACGTACACGACGTACGT", "b": "GGG", "c": "TTTT"} == _records(fa)
    assert sorted(os.listdir(tmp_path)) == ["ragged.fa"]  # nothing written beside the input


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b">a\nACGT\n>b\nGG\n>a\nTT\n", r"line 5: duplicate contig name 'a' \(first on line 1\)"),
        (b"ACGT\nACGT\n", r"line 1: expected a '>name' header line, found 'ACGT'"),
        (b">a\nACGT\n>b\n", r"line 3: the last record 'b' has no sequence"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00junk\n", r"line 1: binary data \(NUL byte\)"),
        (b"", r"no '>' header line"),
    ],
)
def test_problems_are_named_not_could_not_build_fai(tmp_path: Path, content: bytes, message: str) -> None:
    fa = tmp_path / "bad.fa"
    fa.write_bytes(content)
    with pytest.raises(FastaError, match=r"bad\.fa: " + message):
        prepare_fasta(fa)
    gz = tmp_path / "bad.fa.gz"
    gz.write_bytes(gzip.compress(content))
    with pytest.raises(FastaError, match=r"bad\.fa\.gz: " + message):
        prepare_fasta(gz)


def test_an_existing_index_is_used_as_it_is(tmp_path: Path) -> None:
    fa = tmp_path / "r.fa"
    fa.write_text(">x\nACGT\n")
    pysam.faidx(str(fa))
    prepared = prepare_fasta(fa)
    assert prepared.path == str(fa) and prepared.fai == str(fa) + ".fai" and prepared.note is None


def test_missing_and_directory(tmp_path: Path) -> None:
    with pytest.raises(FastaError, match="no such FASTA file"):
        prepare_fasta(tmp_path / "nope.fa")
    with pytest.raises(FastaError, match="not a regular file"):
        prepare_fasta(tmp_path)
