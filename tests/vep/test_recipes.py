"""The window recipe's rules: equal-length ref/alt windows for indels, and which variants have
their own bases inside an ``<oov>`` 6-mer. Checked against windows built by hand."""

from __future__ import annotations

import numpy as np
import pysam
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hexamer import Carbon
from hexamer.vep import score_variants
from hexamer.vep.recipes import (
    WindowPair,
    oov_bp,
    unscored_allele,
    variant_windows,
    window_bounds,
    window_pair_bounds,
)

from .conftest import DATA

OOV_FASTA = DATA / "oov.fa"
OOV_VCF = DATA / "oov_cases.vcf"


@pytest.fixture(scope="module")
def contigs() -> dict[str, str]:
    with pysam.FastaFile(str(OOV_FASTA)) as fa:
        return {name: fa.fetch(name) for name in fa.references}


def _rows(carbon: Carbon, **options: object) -> dict[str, dict]:
    rows = score_variants(carbon, OOV_VCF, OOV_FASTA, on_note=lambda _: None, **options)  # type: ignore[arg-type]
    return {r["id"]: r for r in rows}


def _ll(carbon: Carbon, seq: str) -> float:
    """LL of a window by the book: Carbon.score's per-base FNS log-probabilities, summed."""
    result = carbon.score(seq)
    assert result.per_base is not None
    return float(np.nansum(result.per_base.astype(np.float64)))


# ------------------------------------------------------------------------- equal-length windows


@given(
    p0=st.integers(0, 399),
    ref_len=st.integers(1, 30),
    alt_len=st.integers(1, 30),
    contig_len=st.integers(1, 400),
    window=st.integers(1, 200),
    grid=st.sampled_from([1, 1, 10]),
)
def test_window_pair_bounds_properties(
    p0: int, ref_len: int, alt_len: int, contig_len: int, window: int, grid: int
) -> None:
    if p0 + ref_len > contig_len or (grid > 1 and grid > max(1, window // 2)):
        return
    spans = window_pair_bounds(p0, ref_len, alt_len, contig_len, window, grid)
    diff = alt_len - ref_len
    if spans is None:  # only when the contig cannot hold the longer allele at one length
        assert contig_len - max(0, -diff) < max(ref_len, alt_len)
        return
    (rs, re_), (as_, ae) = spans
    assert 0 <= rs <= p0 and p0 + ref_len <= re_ <= contig_len
    assert 0 <= as_ <= p0 and p0 + ref_len <= ae <= contig_len
    # the two windows hold the same number of bases
    assert re_ - rs == (p0 - as_) + alt_len + (ae - p0 - ref_len)
    if diff == 0:
        assert (rs, re_) == (as_, ae) == window_bounds(p0, ref_len, contig_len, window, grid)
        return
    start, end = window_bounds(p0, ref_len, contig_len, window, grid)
    room = contig_len - max(0, -diff)
    if end - start + max(diff, 0) <= room:
        # the longer window keeps the published bounds; the shorter one gets the difference on
        # its right flank, else (contig end) on its left; the left flank is shared when it can be
        assert (as_, ae) == (start, end) if diff > 0 else (rs, re_) == (start, end)
        shorter = (rs, re_) if diff > 0 else (as_, ae)
        if end + abs(diff) <= contig_len:
            assert shorter == (start, end + abs(diff))
        else:
            assert shorter == (start - (end + abs(diff) - contig_len), contig_len)


def test_deletion_and_insertion_scores_equal_windows_built_by_hand(
    carbon: Carbon, contigs: dict[str, str]
) -> None:
    t = contigs["t"]
    rows = _rows(carbon, window=600)
    # deletion CCTG>C at 0-based 1506: ref window [1206, 1806) as published; the alt window keeps
    # the left flank and takes 3 more bases on the right, so both hold 600 bases
    ref_win = t[1206:1806]
    alt_win = t[1206:1506] + "C" + t[1510:1809]
    assert len(ref_win) == len(alt_win) == 600
    want = _ll(carbon, alt_win) - _ll(carbon, ref_win)
    assert rows["deletion"]["status"] == "ok"
    assert rows["deletion"]["score"] == pytest.approx(want, abs=1e-3)
    # insertion A>AGATTA at 0-based 1000: the ref window takes the 5 extra bases on its right
    ref_win = t[700:1305]
    alt_win = t[700:1000] + "AGATTA" + t[1001:1300]
    assert len(ref_win) == len(alt_win) == 605
    want = _ll(carbon, alt_win) - _ll(carbon, ref_win)
    assert rows["insertion"]["score"] == pytest.approx(want, abs=1e-3)
    # a deletion 10 bp from the contig end: no room on the right, the alt window reaches left
    ref_win = t[2690:3000]
    alt_win = t[2685:2990] + "G" + t[2996:3000]
    assert len(ref_win) == len(alt_win) == 310
    want = _ll(carbon, alt_win) - _ll(carbon, ref_win)
    assert rows["deletion_at_contig_end"]["score"] == pytest.approx(want, abs=1e-3)


def test_short_contig_windows_built_by_hand(carbon: Carbon, contigs: dict[str, str]) -> None:
    s = contigs["short"]
    rows = _rows(carbon, window=600)
    # a 9 bp deletion on a 30 bp contig: the alt window is the whole contig (21 bases), so the
    # ref window gives up bases from its right flank to hold 21 too
    ref_win, alt_win = s[0:21], s[0:5] + "A" + s[15:30]
    assert len(ref_win) == len(alt_win) == 21
    want = _ll(carbon, alt_win) - _ll(carbon, ref_win)
    assert rows["deletion_short_contig"]["score"] == pytest.approx(want, abs=1e-3)
    # an 8 bp insertion: the ref window is the whole contig; the alt window gives up 8 right bases
    ref_win, alt_win = s, s[0:20] + "ATTTTTTTT" + s[21:22]
    assert len(ref_win) == len(alt_win) == 30
    want = _ll(carbon, alt_win) - _ll(carbon, ref_win)
    assert rows["insertion_short_contig"]["score"] == pytest.approx(want, abs=1e-3)
    # a 19 bp deletion cannot have two equal windows on a 30 bp contig: skipped, with the reason
    row = rows["deletion_longer_than_contig_allows"]
    assert row["status"] == "skipped" and row["score"] is None
    assert "too short" in row["reason"]


@pytest.mark.parametrize("grid", [1, 100])
@pytest.mark.parametrize("rc_average", [False, True])
@pytest.mark.parametrize("window", [600, 602, 8192])
def test_engine_equals_naive_on_indels_and_oov(
    carbon: Carbon, window: int, rc_average: bool, grid: int
) -> None:
    options = {"window": window, "rc_average": rc_average, "window_grid": grid}
    fast = _rows(carbon, batch_size=3, **options)
    naive = _rows(carbon, naive=True, **options)
    assert fast.keys() == naive.keys()
    for key, row in fast.items():
        other = naive[key]
        assert (row["status"], row["reason"], row["n_scored_bp"], row["n_oov_bp"]) == (
            other["status"],
            other["reason"],
            other["n_scored_bp"],
            other["n_oov_bp"],
        )
        if row["status"] == "ok":
            assert row["score"] == pytest.approx(other["score"], abs=1e-4)
    assert any(r["status"] == "ok" and len(r["ref"]) != len(r["alt"]) for r in fast.values())


# ------------------------------------------------------------------------- <oov> next to a variant


def test_variant_inside_an_oov_kmer_is_skipped_not_ok(carbon: Carbon, contigs: dict[str, str]) -> None:
    t = contigs["t"]
    assert t[1500:1505] == "NNNNN" and t[2200] == "N"
    # window 600: the SNV at 0-based 1505 starts its 6-mer (offset 300): scored, and the N 6-mer
    # before it is counted
    ok = _rows(carbon, window=600)
    row = ok["snv_next_to_n"]
    assert row["status"] == "ok" and row["n_oov_bp"] == 6 and row["n_scored_bp"] == 594
    assert row["score"] != 0.0
    # window 602: the variant sits at offset 301, its 6-mer [300, 306) holds the N at 1504
    skipped = _rows(carbon, window=602)
    row = skipped["snv_next_to_n"]
    assert row["status"] == "skipped" and row["score"] is None
    assert "<oov>" in row["reason"] and repr(t[1504:1510]) in row["reason"]
    assert row["n_oov_bp"] > 0
    # an N right after the variant, in the same 6-mer: skipped for every window and strand
    for options in ({"window": 600}, {"window": 602}, {"window": 600, "rc_average": True}):
        assert _rows(carbon, **options)["snv_before_n"]["status"] == "skipped"
    # with --window-grid the windows move, the rule does not
    gridded = _rows(carbon, window=600, window_grid=100)
    assert gridded["snv_before_n"]["status"] == "skipped"
    # never an `ok` row whose ref and alt windows only differ inside <oov>
    for rows in (ok, skipped, gridded):
        for r in rows.values():
            if r["status"] == "ok":
                assert r["n_scored_bp"] > 0 and r["score"] != 0.0


def test_next_base_counts_oov_context_bases(carbon: Carbon) -> None:
    rows = _rows(carbon, recipe="next_base", context=600, context_grid=6)
    row = rows["snv_n_in_context"]  # context [1200, 1800) holds the 6-mer [1500, 1506) with NNNNN
    assert row["status"] == "ok"
    assert (row["n_scored_bp"], row["n_oov_bp"]) == (594, 6)
    naive = _rows(carbon, recipe="next_base", context=600, context_grid=6, naive=True)
    assert (naive["snv_n_in_context"]["n_scored_bp"], naive["snv_n_in_context"]["n_oov_bp"]) == (594, 6)


def test_unscored_allele_and_oov_bp_by_hand() -> None:
    # a 12-base window: chunks [0, 6) and [6, 12) forward; [0, 6) and [6, 12) of the reverse
    # complement are forward [6, 12) and [0, 6)
    pair = WindowPair("ACGTANACGTAC", "ACGTANACGTAC", 7, 7, 1, 1)
    assert unscored_allele(pair) is None
    assert unscored_allele(pair, rc_average=True) is None
    # 13 bases: reverse-strand chunks are forward [7, 13), [1, 7), [0, 1); the variant at 6 shares
    # [1, 7) with the N at 5 on that strand only
    pair = WindowPair("ACGTANACGTACG", "ACGTANACGTACG", 6, 6, 1, 1)
    assert unscored_allele(pair) is None
    assert "reverse strand" in (unscored_allele(pair, rc_average=True) or "")
    assert oov_bp("ACGTANACGTAC") == 6
    assert oov_bp("ACGTANACGTACG") == 6 and oov_bp("ACGTANACGTACG", rc=True) == 6
    assert oov_bp("NACGTACG", rc=True) == 2  # the reverse strand's short tail chunk holds 2 bases
    assert oov_bp("ACGTAC") == 0


def test_variant_windows_uses_fetch(contigs: dict[str, str]) -> None:
    t = contigs["t"]
    pair = variant_windows(lambda a, b: t[a:b], 1506, "CCTG", "C", len(t), 600)
    assert pair is not None
    assert (pair.ref, pair.alt) == (t[1206:1806], t[1206:1506] + "C" + t[1510:1809])
    assert (pair.ref_offset, pair.alt_offset, pair.start) == (300, 300, 1206)


@pytest.mark.parametrize("suffix", ["vcf.gz", "parquet", "tsv", "jsonl"])
def test_scored_and_oov_bases_are_in_every_output(carbon: Carbon, tmp_path, suffix: str) -> None:
    import json

    import pyarrow.parquet as pq

    from hexamer.vep import run_vep

    out = tmp_path / f"scored.{suffix}"
    run_vep(carbon, OOV_VCF, OOV_FASTA, out, window=600, on_note=lambda _: None)
    if suffix == "vcf.gz":
        with pysam.VariantFile(str(out)) as vf:
            for info in ("HEXAMER_SCORED_BP", "HEXAMER_OOV_BP"):
                assert vf.header.info[info].number == "A" and vf.header.info[info].type == "Integer"
            got = {rec.id: (rec.info["HEXAMER_SCORED_BP"][0], rec.info["HEXAMER_OOV_BP"][0]) for rec in vf}
    elif suffix == "parquet":
        got = {r["id"]: (r["n_scored_bp"], r["n_oov_bp"]) for r in pq.read_table(out).to_pylist()}
    elif suffix == "jsonl":
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        got = {r["id"]: (r["n_scored_bp"], r["n_oov_bp"]) for r in rows}
    else:
        lines = [line.split("\t") for line in out.read_text().splitlines()]
        head = lines[0]
        got = {
            r[head.index("id")]: (int(r[head.index("n_scored_bp")]), int(r[head.index("n_oov_bp")]))
            for r in lines[1:]
            if r[head.index("n_oov_bp")]
        }
    assert got["snv_next_to_n"] == (594, 6)
    assert got["deletion"][0] + got["deletion"][1] == 600


def test_rc_average_scores_iupac_windows_as_the_acgtn_complement_did(carbon: Carbon) -> None:
    """The window recipe's reverse strand uses the one IUPAC-aware ``reverse_complement``: an
    ambiguity code (R, Y, ...) is ``<oov>`` on either strand whatever its complement, so the score is
    the one an ACGTN-only complement gave."""
    from hexamer.io import reverse_complement
    from hexamer.vep.recipes import naive_window_score

    acgtn = str.maketrans("ACGTNacgtn", "TGCANtgcan")
    ref = "ACGTACRGTTACGYACGTTGCAKACGTACGTTGCAMACGTA"
    alt = ref[:20] + "G" + ref[21:]
    assert reverse_complement(ref) != ref.translate(acgtn)[::-1]  # the two complements differ here
    lls = carbon.backend.window_log_likelihoods(
        [
            reverse_complement(ref),
            ref.translate(acgtn)[::-1],
            reverse_complement(alt),
            alt.translate(acgtn)[::-1],
        ]
    )
    assert lls[0] == lls[1] and lls[2] == lls[3]
    assert np.isfinite(naive_window_score(carbon, ref, alt, rc_average=True))
