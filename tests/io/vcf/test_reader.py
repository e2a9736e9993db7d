"""VCF/BCF reading, allele classification and the reference FASTA."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pysam
import pytest

from hexamer.io.fasta import FastaError
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import VcfInputError, read_vcf
from hexamer.io.vcf.records import classify

DATA = Path(__file__).resolve().parents[2] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
SLICE_VCF = DATA / "chr20_slice.vcf"
EDGE_VCF = DATA / "edge_cases.vcf"
MALFORMED_VCF = DATA / "malformed.vcf"
UNREADABLE_VCF = DATA / "unreadable_fields.vcf"


@pytest.mark.parametrize(
    ("ref", "alt", "kind", "skipped"),
    [
        ("A", "G", "SNV", False),
        ("a", "g", "SNV", False),
        ("AT", "GC", "MNV", False),
        ("A", "ACCA", "insertion", False),
        ("TAGG", "T", "deletion", False),
        ("GGA", "ATTGA", "complex", False),
        ("CAT", "CGT", "MNV", False),
        ("A", "<DEL>", "symbolic", True),
        ("A", "*", "symbolic", True),
        ("T", "T]20:70000]", "symbolic", True),
        ("T", "[20:70000[T", "symbolic", True),
        ("A", ".", "none", True),
        ("A", "A", "none", True),  # ALT equals REF: no change to score
        ("ac", "AC", "none", True),
    ],
)
def test_classify(ref: str, alt: str, kind: str, skipped: bool) -> None:
    got, reason = classify(ref, alt)
    assert got == kind
    assert (reason is not None) == skipped


def _variants(path: Path) -> list:
    return [v for rec in read_vcf(path) for v in rec.variants()]


def test_edge_cases_one_variant_per_alt() -> None:
    records = list(read_vcf(EDGE_VCF))
    assert len(records) == 19
    assert [r.line for r in records[:2]] == [10, 11]  # line numbers of the data lines
    by_id = {v.id + f"/{v.alt_index}": v for v in _variants(EDGE_VCF)}
    assert [by_id[f"multi_snv/{j}"].alt for j in range(3)] == ["A", "G", "T"]
    assert {by_id[f"multi_snv/{j}"].record for j in range(3)} == {0}
    assert by_id["lower_case/0"].ref == "A" and by_id["lower_case/0"].alt == "G"
    assert by_id["star/0"].kind == "SNV" and by_id["star/0"].skip is None
    assert by_id["star/1"].kind == "symbolic" and "'*'" in (by_id["star/1"].skip or "")
    assert by_id["sv_del/0"].skip is not None and "<DEL>" in by_id["sv_del/0"].skip
    assert by_id["no_alt/0"].kind == "none"
    assert by_id["chr_prefix/0"].chrom == "chr20"


def test_malformed_lines_are_reported_and_the_rest_kept() -> None:
    records = list(read_vcf(MALFORMED_VCF))
    assert [r.index for r in records] == list(range(7))  # the blank line is not a record
    problems = {r.id: r.problem for r in records if r.problem}
    assert set(problems) == {"bad_pos", "too_few"}
    assert "line 5" in problems["bad_pos"] and "POS 'sixty'" in problems["bad_pos"]
    assert "line 6" in problems["too_few"] and "3 tab-separated field(s)" in problems["too_few"]
    variants = {v.id: v for v in _variants(MALFORMED_VCF)}
    assert "'Q'" in (variants["bad_ref"].error or "")
    assert "POS 0" in (variants["pos_zero"].error or "")
    assert [v.id for v in variants.values() if v.error is None] == ["good1", "good2", "good3"]


def test_out_of_range_pos_and_non_utf8_fields_fail_one_record_each() -> None:
    """POS past htslib's 62-bit limit (2^63 once overflowed a 64-bit column) and a 0xff byte in ID
    (once a UnicodeDecodeError that lost every record) are one failed record each, with line and
    field named; a non-UTF-8 INFO value is never decoded, so its record stays good."""
    records = list(read_vcf(UNREADABLE_VCF))
    assert [r.index for r in records] == list(range(6))
    by_line = {r.line: r for r in records}
    assert by_line[5].problem is not None and "line 5" in by_line[5].problem
    assert "POS 9223372036854775808 is larger than" in by_line[5].problem
    assert by_line[5].pos == 0 and by_line[5].id == "pos_2_63"
    assert by_line[6].problem is not None and "POS 4611686018427387904" in by_line[6].problem
    assert by_line[7].problem is not None and "line 7" in by_line[7].problem
    assert "ID ('bad?id') holds byte 0xff" in by_line[7].problem
    assert by_line[7].chrom == "20" and by_line[7].pos == 60310
    good = [r.id for r in records if r.problem is None]
    assert good == ["good1", "bad_info", "good2"]
    variants = [v for r in records for v in r.variants()]
    assert [v.error is not None for v in variants] == [False, True, True, True, False, False]


def _as_tuples(path: Path) -> list[tuple]:
    return [(r.chrom, r.pos, r.id, r.ref, r.alts) for r in read_vcf(path)]


def test_bgzipped_indexed_and_bcf_inputs_read_the_same(tmp_path: Path) -> None:
    plain = _as_tuples(SLICE_VCF)
    gz = tmp_path / "slice.vcf.gz"
    pysam.tabix_compress(str(SLICE_VCF), str(gz))
    assert _as_tuples(gz) == plain  # bgzipped, no index
    pysam.tabix_index(str(gz), preset="vcf")
    assert (tmp_path / "slice.vcf.gz.tbi").exists()
    assert _as_tuples(gz) == plain  # bgzipped + indexed
    bcf = tmp_path / "slice.bcf"
    with (
        pysam.VariantFile(str(SLICE_VCF)) as src,
        pysam.VariantFile(str(bcf), "wb", header=src.header) as out,
    ):
        for rec in src:
            out.write(rec)
    assert _as_tuples(bcf) == plain
    plain_gz = tmp_path / "plain.vcf.gz"
    plain_gz.write_bytes(gzip.compress(SLICE_VCF.read_bytes()))
    assert _as_tuples(plain_gz) == plain  # plain gzip also reads


def test_bad_files_raise_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(VcfInputError, match="no such file"):
        read_vcf(tmp_path / "missing.vcf")
    bad = tmp_path / "bad_header.vcf"
    bad.write_text("##fileformat=VCFv4.2\n#CHROM POS ID REF ALT\n20 1 . A C\n")
    with pytest.raises(VcfInputError, match="header is malformed"):
        read_vcf(bad)
    text = tmp_path / "notes.vcf"
    text.write_text("hello\n")
    with pytest.raises(VcfInputError, match=r"notes\.vcf: not a readable VCF"):
        read_vcf(text)


def test_reference_reads_bgzipped_indexed_fasta() -> None:
    with Reference(FASTA) as ref:
        assert ref.lengths == {"20": 440_000}
        assert ref.fetch("20", 60_308, 60_309) == "G"  # chr20:60309 G>T (GoNL)
        assert ref.fetch("20", 439_995, 440_010) == ref.fetch("20", 439_995, 440_000)  # clipped at the end
        assert ref.fetch("20", -5, 3) == "NNN"


def test_reference_indexes_into_a_temp_dir_never_next_to_the_file(tmp_path: Path) -> None:
    with Reference(FASTA) as ref:
        seq = ref.fetch("20", 60_000, 61_000)
    plain = tmp_path / "plain" / "ref.fa"
    plain.parent.mkdir()
    plain.write_text(f">20\n{seq}\n>21\nACGT\n")
    bgz = tmp_path / "bgz" / "ref.fa.gz"
    bgz.parent.mkdir()
    shutil.copy(FASTA, bgz)  # bgzipped, without its .fai/.gzi
    for path in (plain, bgz):
        before = sorted(os.listdir(path.parent))
        with Reference(path) as ref:
            assert ref.fetch("20", 0, 10) == seq[:10] if path == plain else ref.lengths["20"] == 440_000
        assert sorted(os.listdir(path.parent)) == before
    gz = tmp_path / "gz" / "ref.fa.gz"
    gz.parent.mkdir()
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    with Reference(gz) as ref:  # plain gzip (UCSC's hg38.fa.gz): read through an uncompressed copy
        assert ref.fetch("20", 0, 10) == seq[:10] and ref.lengths["21"] == 4
        assert ref.note is not None and "plain gzip" in ref.note
    assert sorted(os.listdir(gz.parent)) == ["ref.fa.gz"]
    with pytest.raises(FastaError, match="no such FASTA"):
        Reference(tmp_path / "missing.fa")
    junk = tmp_path / "junk.fa"
    junk.write_text("hello\n")
    with pytest.raises(FastaError, match=r"junk\.fa: line 1: expected a '>name' header line, found 'hello'"):
        Reference(junk)


def test_contig_names_resolve_when_unambiguous(tmp_path: Path) -> None:
    fa = tmp_path / "ref.fa"
    fa.write_text(">chr1\nACGT\n>MT\nACGT\n>chrM\nACGT\n>X\nACGT\n")
    with Reference(fa) as ref:
        assert ref.resolve("chr1") == ("chr1", None)
        name, note = ref.resolve("1")
        assert name == "chr1" and note is not None and "'1'" in note and "'chr1'" in note
        assert ref.resolve("chrX")[0] == "X"
        name, reason = ref.resolve("M")
        assert name is None and reason is not None and "could be any of" in reason
        name, reason = ref.resolve("chr7")
        assert name is None and reason is not None and "not in the FASTA" in reason
