"""The one-line job summary: rows per status, and reasons folded into short labels."""

from __future__ import annotations

from hexamer.vep import score_variants, status_summary
from hexamer.vep.summary import reason_category

from .conftest import EDGE_VCF, FASTA


def test_status_summary_in_plain_words() -> None:
    counts = {"ok": 120, "skipped": 3, "failed": 1}
    reasons = {
        ("skipped", "contig absent"): 2,
        ("skipped", "symbolic allele"): 1,
        ("failed", "scoring error"): 1,
    }
    assert status_summary(counts, reasons) == (
        "ok 120, skipped 3 (contig absent 2, symbolic allele 1), failed 1 (scoring error 1)"
    )
    assert status_summary({}) == "no rows"
    assert status_summary({"ok": 1234}) == "ok 1,234"


def test_every_reason_the_engine_gives_has_a_label(carbon) -> None:
    rows = score_variants(carbon, EDGE_VCF, FASTA, window=600, on_note=lambda _: None)
    labels = {reason_category(r["reason"]) for r in rows if r["status"] != "ok"}
    assert "other" not in labels and "no reason" not in labels
    assert {"symbolic allele", "contig absent", "REF differs from FASTA", "N in allele"} <= labels


def test_alt_equal_to_ref_is_counted_as_skipped_under_its_own_label() -> None:
    from hexamer.io.vcf.records import ALT_EQUALS_REF

    assert reason_category(ALT_EQUALS_REF) == "ALT equals REF"
