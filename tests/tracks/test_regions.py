"""Region strings: 1-based inclusive, whole contigs, contig aliases; errors name the region."""

from __future__ import annotations

import pytest

from hexamer.tracks import Region, RegionError, parse_region, parse_regions

LENGTHS = {"chr20": 1000, "chrM": 50, "HLA:1": 30, "empty": 0}


def test_forms() -> None:
    assert parse_region("chr20:1-100", LENGTHS) == Region("chr20", 0, 100)
    assert parse_region("chr20:1,001-1,000".replace("1,001", "901"), LENGTHS) == Region("chr20", 900, 1000)
    assert parse_region("chr20", LENGTHS) == Region("chr20", 0, 1000)
    assert parse_region("HLA:1", LENGTHS) == Region("HLA:1", 0, 30)  # a contig name holding ':'
    assert str(Region("chr20", 0, 100)) == "chr20:1-100" and len(Region("chr20", 10, 100)) == 90
    alias = {"20": ("chr20", "used chr20")}
    assert parse_region("20:5-6", LENGTHS, lambda n: alias.get(n, (None, None))) == Region("chr20", 4, 6)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chrX:1-10", "contig 'chrX' is not in the FASTA"),
        ("chr20:0-10", "need 1 <= START <= END"),
        ("chr20:10-9", "need 1 <= START <= END"),
        ("chr20:1-1001", "past the end of chr20"),
        ("chr20:a-b", "expected CONTIG:START-END"),
        ("empty", "is empty"),
    ],
)
def test_errors_name_the_region(text: str, message: str) -> None:
    with pytest.raises(RegionError, match=message) as info:
        parse_region(text, LENGTHS)
    assert repr(text) in str(info.value)


def test_sorted_in_fasta_order_and_no_overlaps() -> None:
    got = parse_regions(["chrM:1-5", "chr20:500-600", "chr20:1-10"], LENGTHS)
    assert [str(r) for r in got] == ["chr20:1-10", "chr20:500-600", "chrM:1-5"]
    with pytest.raises(RegionError, match="overlap"):
        parse_regions(["chr20:1-10", "chr20:10-20"], LENGTHS)
