"""Region strings against a FASTA: 1-based inclusive, aliases, limits, merging."""

from __future__ import annotations

import pytest

from hexamer.io.reference import Reference
from hexamer.ism.regions import Region, RegionError, merge_regions, parse_region
from tests.ism.conftest import FASTA


def test_parse_region_forms() -> None:
    with Reference(FASTA) as ref:
        assert parse_region("20:60,301-60,400", ref) == Region("20", "20", 60300, 60400)
        assert parse_region("20:5", ref).length == 1
        assert parse_region("chr20:1-10", ref) == Region("chr20", "20", 0, 10)  # alias kept as written
        assert parse_region("20", ref, max_bp=10**6).length == 440000
        with pytest.raises(RegionError, match="100,000"):
            parse_region("20", ref)
        with pytest.raises(RegionError, match="split it"):
            parse_region("20:1-101", ref, max_bp=100)


def test_merge_regions_touching_and_overlapping() -> None:
    a, b, c = Region("20", "20", 0, 10), Region("20", "20", 10, 20), Region("20", "20", 30, 40)
    assert merge_regions([c, b, a]) == [Region("20", "20", 0, 20), c]
