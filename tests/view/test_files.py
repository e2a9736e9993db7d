"""What ``hexamer view`` accepts, and the errors that name the file for what it refuses."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from hexamer.view.files import ViewError, check_contigs, classify, fasta_contigs, parse_locus
from tests.view.conftest import FASTA, VIEW


def test_kinds_and_indexes() -> None:
    assert classify(VIEW / "prob_A.bw").kind == "bigwig"
    vcf = classify(VIEW / "scored.vcf.gz")
    assert (vcf.kind, vcf.index) == ("vcf", VIEW / "scored.vcf.gz.tbi")
    assert classify(VIEW / "scored.vcf").index is None  # plain text: igv.js reads it whole
    ism = classify(VIEW / "ism.tsv.bgz")
    assert (ism.kind, ism.index, ism.label) == ("ism", VIEW / "ism.tsv.bgz.tbi", "ism")
    fa = classify(FASTA)
    assert (fa.kind, fa.index, fa.gzi) == ("fasta", Path(f"{FASTA}.fai"), Path(f"{FASTA}.gzi"))
    assert fasta_contigs(fa) == {"20": 440_000}


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("scores.parquet", b"PAR1", "igv.js cannot show this file type"),
        ("calls.bcf", b"BCF", "bcftools view -Oz"),
        ("x.vcf.gz.tbi", b"", "an index; give its data file"),
        ("other.tsv.gz", b"a\tb\n", "not a CADD-layout table"),
    ],
)
def test_refused_types_name_the_file(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ViewError, match=expected) as err:
        classify(path)
    assert str(path) in str(err.value)


def test_missing_index_names_the_command(tmp_path: Path) -> None:
    vcf = tmp_path / "scored.vcf.gz"
    shutil.copy(VIEW / "scored.vcf.gz", vcf)
    with pytest.raises(ViewError, match=re.escape(f"tabix -p vcf {vcf}")):
        classify(vcf)
    fa = tmp_path / "ref.fa"
    fa.write_text(">20\nACGT\n")
    with pytest.raises(ViewError, match=re.escape(f"samtools faidx {fa}")):
        classify(fa)
    with pytest.raises(ViewError, match="no such file"):
        classify(tmp_path / "absent.bw")


def test_contig_checks(tmp_path: Path) -> None:
    ref = fasta_contigs(classify(FASTA))
    files = [classify(VIEW / "scored.vcf"), classify(VIEW / "entropy.bw")]
    check_contigs(files, ref, parse_locus("chr20:60,001-60,100"))  # igv.js aliases chr20 = 20
    with pytest.raises(ViewError, match="contig 7 is not in the reference"):
        check_contigs(files, ref, parse_locus("7:1-10"))
    with pytest.raises(ViewError, match="past the end of 20"):
        check_contigs(files, ref, parse_locus("20:439000-440001"))
    other = tmp_path / "other.vcf"
    other.write_text(
        "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\nchrX\t5\t.\tA\tC\t.\t.\t.\n"
    )
    with pytest.raises(ViewError, match=re.escape(f"{other}: contigs not in the reference: chrX")):
        check_contigs([classify(other)], ref, None)


def test_bigwig_without_the_region_contig() -> None:
    ref = {"20": 440_000, "21": 1_000}
    with pytest.raises(ViewError, match=r"entropy\.bw: has no values on 21"):
        check_contigs([classify(VIEW / "entropy.bw")], ref, parse_locus("21:1-100"))


@pytest.mark.parametrize("text", ["20", "20:5", "20:9-3", "20:0-4", ":1-2"])
def test_bad_locus(text: str) -> None:
    with pytest.raises(ViewError, match="--region"):
        parse_locus(text)


def test_a_folder_stands_for_its_viewable_files(tmp_path: Path) -> None:
    from hexamer.view.files import expand_folders

    for name in ("entropy.bw", "prob_A.bw"):
        shutil.copy(VIEW / name, tmp_path / name)
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    assert expand_folders([tmp_path, VIEW / "regions.bed"]) == [
        tmp_path / "entropy.bw",
        tmp_path / "prob_A.bw",
        VIEW / "regions.bed",
    ]
    with pytest.raises(ViewError, match=re.escape(f"{tmp_path / 'sub'}: a folder with no file")):
        expand_folders([tmp_path / "sub"])
