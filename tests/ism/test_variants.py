"""The variants of saturation mutagenesis (``hexamer.ism.variants``)."""

from __future__ import annotations

from hexamer.ism.regions import Region
from hexamer.ism.variants import ism_records
from hexamer.vep import Reference, classify

from .conftest import FASTA, OOV_FASTA


def test_no_ism_variant_has_alt_equal_to_ref() -> None:
    """Every SNV, deletion and insertion of a region changes the sequence: none is the REF = ALT
    row ``hexamer vep`` skips (calibration backgrounds are made of these variants too)."""
    regions = [
        Region("20", "20", 59_990, 60_010),  # the end of the N gap and the first real bases
        Region("20", "20", 0, 3),  # the contig start: the deletion anchored on the base after
    ]
    with Reference(FASTA) as ref, Reference(OOV_FASTA) as oov:
        items = [*ism_records(ref, regions, indels=True), *ism_records(oov, [Region("t", "t", 1495, 1510)])]
    records = [item.record for item in items if item.skip is None]
    assert len(records) > 60
    for rec in records:
        for alt in rec.alts:
            assert alt != rec.ref, rec
            kind, skip = classify(rec.ref, alt)
            assert kind != "none" and skip is None, rec
