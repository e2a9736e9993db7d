"""VCF contig names matched to FASTA contig names: renames, exact names, unambiguous aliases."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.io.contigs import ContigResolver, RenameFileError, read_rename_file

NCBI = "gi|88193823|ref|NC_007795.1|"  # the header of the real S. aureus NCTC 8325 FASTA


@pytest.mark.parametrize(
    ("fasta", "vcf", "expected"),
    [
        ([NCBI], "NC_007795", NCBI),  # the real RN4220 VCF against its NCBI FASTA
        ([NCBI], "NC_007795.1", NCBI),
        ([NCBI], "NC_007795.2", None),  # another version is another sequence
        (["NC_007795.1"], "NC_007795", "NC_007795.1"),
        (["NC_007795"], "NC_007795.1", "NC_007795"),
        (["chr1", "chr2"], "1", "chr1"),
        (["1", "2"], "chr1", "1"),
        (["MT"], "chrM", "MT"),
        (["chrM"], "MT", "chrM"),
        (["chrM"], "M", "chrM"),
        (["1"], "chr10", None),
        (["chrX"], "X", "chrX"),
    ],
)
def test_unambiguous_aliases(fasta: list[str], vcf: str, expected: str | None) -> None:
    hit = ContigResolver(fasta).resolve(vcf)
    assert hit.contig == expected
    if expected is None:
        assert hit.how == "missing" and hit.message is not None and "not in the FASTA" in hit.message
    else:
        assert hit.how == "alias" and hit.message is not None and repr(expected) in hit.message


def test_exact_names_win_and_ambiguous_aliases_are_not_guessed() -> None:
    resolver = ContigResolver(["1", "chr1", "MT", "chrM", "NC_1.1", "NC_1.2"])
    assert resolver.resolve("chr1").how == "exact" and resolver.resolve("chr1").message is None
    hit = resolver.resolve("M")
    assert hit.contig is None and hit.how == "ambiguous"
    assert hit.message is not None and "MT, chrM" in hit.message and "--rename-chrs" in hit.message
    assert resolver.resolve("NC_1").how == "ambiguous"
    assert resolver.resolve("NC_1.2").how == "exact"


def test_rename_table_comes_first(tmp_path: Path) -> None:
    table = tmp_path / "names.txt"
    table.write_text("# old new\nNC_007795   staph\n\n20\tchr20\n")
    renames = read_rename_file(table)
    assert renames == {"NC_007795": "staph", "20": "chr20"}
    resolver = ContigResolver(["staph", "20"], renames)
    assert resolver.resolve("NC_007795").contig == "staph" and resolver.resolve("NC_007795").how == "renamed"
    hit = resolver.resolve("20")  # renamed to a name the FASTA lacks: not matched, even though "20" exists
    assert hit.contig is None and hit.message is not None and "renamed to 'chr20'" in hit.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b c\n", r"line 1: expected two whitespace-separated columns \(old new\), found 3"),
        ("a b\nx\n", r"line 2: expected two .* found 1"),
        ("a b\na c\n", r"line 2: 'a' is renamed to 'b' on line 1 and to 'c' here"),
    ],
)
def test_bad_rename_files_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    table = tmp_path / "r.txt"
    table.write_text(text)
    with pytest.raises(RenameFileError, match=r"r\.txt: " + message):
        read_rename_file(table)
    with pytest.raises(RenameFileError, match="no such file"):
        read_rename_file(tmp_path / "missing.txt")
