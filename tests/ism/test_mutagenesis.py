"""ISM rows equal per-variant ``score_variants`` on every variant (both recipes, RC averaging,
indels), with the statuses and reasons ``hexamer vep`` gives."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from hexamer.ism import (
    ISM_COLUMNS,
    RegionError,
    ism_settings,
    saturation_mutagenesis,
    scan_mutagenesis,
    site_mutagenesis,
)
from hexamer.vep import score_variants
from tests.ism.conftest import FASTA, NEXT_BASE, OOV_FASTA, SLICE_VCF, WINDOW

warnings.filterwarnings("ignore", category=UserWarning, module="hexamer")


def write_vcf(path: Path, rows: list[dict], contig: str, length: int) -> Path:
    """The ISM variants as a plain VCF, one record per row (so the two runs key alike)."""
    lines = ["##fileformat=VCFv4.2", f"##contig=<ID={contig},length={length}>"]
    lines.append("#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO")
    lines += [f"{r['chrom']}\t{r['pos']}\t.\t{r['ref']}\t{r['alt']}\t.\t.\t." for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def per_variant(carbon, tmp_path: Path, rows: list[dict], fasta: Path, contig: str, length: int, **settings):
    vcf = write_vcf(tmp_path / "ism.vcf", rows, contig, length)
    return list(score_variants(carbon, vcf, fasta, on_note=lambda _: None, **settings))


def assert_same(ism: list[dict], vep: list[dict]) -> None:
    assert len(ism) == len(vep)
    for a, b in zip(ism, vep, strict=True):
        assert (a["pos"], a["ref"], a["alt"]) == (b["pos"], b["ref"], b["alt"])
        assert (a["status"], a["reason"], a["kind"]) == (b["status"], b["reason"], b["kind"])
        assert (a["n_scored_bp"], a["n_oov_bp"]) == (b["n_scored_bp"], b["n_oov_bp"])
        if a["status"] == "ok":
            assert a["score"] == pytest.approx(b["score"], abs=1e-6)
        else:
            assert a["score"] is None and b["score"] is None


@pytest.mark.parametrize(
    "settings",
    [
        {**WINDOW},  # the default of both commands: windows centred on each variant
        {**WINDOW, "window_grid": 120},  # windows shared over 120-bp tiles (half the window)
        {**WINDOW, "rc_average": True},
        NEXT_BASE,
    ],
    ids=["window", "window-tiles", "window-rc", "next_base"],
)
def test_every_snv_equals_score_variants(carbon, tmp_path, settings) -> None:
    rows = saturation_mutagenesis(carbon, FASTA, region="20:60301-60312", **settings)
    assert len(rows) == 12 * 3
    assert [(r["pos"], r["alt"]) for r in rows] == sorted((r["pos"], r["alt"]) for r in rows)
    assert all(set(r) == set(ISM_COLUMNS) for r in rows)
    assert all(r["status"] == "ok" for r in rows)
    grid = settings.get("window_grid", 1)
    assert {r["window_placement"] for r in rows} == (
        {"centred" if grid == 1 else f"grid:{grid}"} if "window" in settings else {None}
    )
    vep = per_variant(carbon, tmp_path, rows, FASTA, "20", 440000, **settings)
    assert_same(rows, vep)


def test_the_same_snv_scores_the_same_through_ism_and_vep_by_default(carbon, tmp_path) -> None:
    """No recipe option given to either: ISM centres its windows on the variant as VEP does, so
    the score of an SNV does not depend on which command made it."""
    rows = saturation_mutagenesis(carbon, FASTA, region="20:60301-60301", window=240)
    snv = next(r for r in rows if r["alt"] == "G" or r["ref"] == "G")
    vcf = write_vcf(tmp_path / "one.vcf", [snv], "20", 440000)
    (vep,) = score_variants(carbon, vcf, FASTA, window=240, on_note=lambda _: None)
    assert snv["status"] == vep["status"] == "ok"
    assert snv["score"] == vep["score"]
    assert snv["window_placement"] == "centred" and ism_settings().window_grid == 1


def test_a_tiled_run_says_so_and_scores_differently(carbon) -> None:
    centred = saturation_mutagenesis(carbon, FASTA, region="20:60301-60303", window=240)
    tiled = saturation_mutagenesis(carbon, FASTA, region="20:60301-60303", window=240, window_grid=120)
    assert {r["window_placement"] for r in tiled} == {"grid:120"}
    assert any(abs(a["score"] - b["score"]) > 1e-6 for a, b in zip(centred, tiled, strict=True))


def test_n_bases_skipped_with_the_vep_reasons(carbon, tmp_path) -> None:
    # t:1,496-1,510 holds NNNNN at 1,501-1,505: those are skipped ("allele contains N"), and
    # bases sharing a 6-mer with an N are skipped as <oov>, exactly as hexamer vep does
    rows = saturation_mutagenesis(carbon, OOV_FASTA, region="t:1496-1510", **WINDOW, window_grid=1)
    n_rows = [r for r in rows if r["ref"] == "N"]
    assert len(n_rows) == 5 * 4  # every base differs from N
    assert all(r["status"] == "skipped" and "allele contains N" in r["reason"] for r in n_rows)
    assert any(r["status"] == "skipped" and "<oov>" in (r["reason"] or "") for r in rows if r["ref"] != "N")
    assert any(r["status"] == "ok" for r in rows)
    assert_same(rows, per_variant(carbon, tmp_path, rows, OOV_FASTA, "t", 3000, **WINDOW, window_grid=1))


def test_indels_equal_score_variants(carbon, tmp_path) -> None:
    rows = saturation_mutagenesis(
        carbon, FASTA, region="20:60301-60304", indels=True, **WINDOW, window_grid=1
    )
    kinds = [r["kind"] for r in rows]
    assert kinds.count("SNV") == 12 and kinds.count("deletion") == 4 and kinds.count("insertion") == 16
    assert [r["pos"] for r in rows] == sorted(r["pos"] for r in rows)
    deletion = next(r for r in rows if r["kind"] == "deletion")
    assert deletion["pos"] == 60300 and len(deletion["ref"]) == 2 and deletion["alt"] == deletion["ref"][0]
    assert_same(rows, per_variant(carbon, tmp_path, rows, FASTA, "20", 440000, **WINDOW, window_grid=1))


def test_iupac_base_skipped_before_scoring(carbon, tmp_path) -> None:
    fasta = tmp_path / "iupac.fa"
    fasta.write_text(">s\n" + "ACGTACGTAC" * 3 + "R" + "ACGTACGTAC" * 3 + "\n")
    rows = saturation_mutagenesis(carbon, fasta, region="s:29-33", **WINDOW)
    r_rows = [r for r in rows if r["pos"] == 31]
    assert len(r_rows) == 4 and all(r["status"] == "skipped" for r in r_rows)
    assert "IUPAC" in r_rows[0]["reason"] and "s:31" in r_rows[0]["reason"]


@pytest.mark.parametrize(
    ("region", "needle"),
    [
        ("chr9:1-10", "chr9"),
        ("20:0-10", "below 1"),
        ("20:20-10", "before start"),
        ("20:439990-440010", "past the end"),
        ("20:a-b", "not CHROM"),
    ],
)
def test_bad_region_named(carbon, region, needle) -> None:
    with pytest.raises(RegionError, match=needle):
        saturation_mutagenesis(carbon, FASTA, region=region, **WINDOW)


def test_site_mode_merges_flanks_and_lists_unplaced(carbon, tmp_path) -> None:
    vcf = tmp_path / "sites.vcf"
    vcf.write_text(
        "##fileformat=VCFv4.2\n##contig=<ID=20>\n##contig=<ID=chrX>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
        "20\t60309\t.\tG\tT\t.\t.\t.\n20\t60311\t.\tA\tC\t.\t.\t.\nchrX\t5\t.\tA\tC\t.\t.\t.\n"
    )
    scan = site_mutagenesis(carbon, FASTA, vcf, flank=3, **WINDOW)
    assert [str(r) for r in scan.regions] == ["20:60306-60314"]
    assert len(scan.rows) == 9 * 3
    assert [u[1] for u in scan.unplaced] == ["chrX"]
    direct = saturation_mutagenesis(carbon, FASTA, region="20:60306-60314", **WINDOW)
    assert [r["score"] for r in scan.rows] == [r["score"] for r in direct]
    with pytest.raises(ValueError, match="flank"):
        site_mutagenesis(carbon, FASTA, vcf, flank=-1, **WINDOW)


def test_scan_takes_one_settings_for_a_region_or_the_sites_of_a_vcf(carbon) -> None:
    """``scan_mutagenesis``: what ``saturation_mutagenesis`` and ``site_mutagenesis`` run, given a
    ready :class:`VepSettings`; exactly one of region and vcf."""
    settings = ism_settings(**NEXT_BASE)
    scan = scan_mutagenesis(carbon, FASTA, settings, region="20:60301-60306")
    assert scan.rows == saturation_mutagenesis(carbon, FASTA, region="20:60301-60306", **NEXT_BASE)
    assert [str(r) for r in scan.regions] == ["20:60301-60306"] and scan.unplaced == []
    sites = scan_mutagenesis(carbon, FASTA, settings, vcf=SLICE_VCF, flank=1, on_note=lambda _: None)
    want = site_mutagenesis(carbon, FASTA, SLICE_VCF, flank=1, on_note=lambda _: None, **NEXT_BASE)
    assert (sites.rows, sites.regions, sites.unplaced) == (want.rows, want.regions, want.unplaced)
    for where in ({}, {"region": "20:60301-60306", "vcf": SLICE_VCF}):
        with pytest.raises(ValueError, match="not both"):
            scan_mutagenesis(carbon, FASTA, settings, **where)


def test_non_finite_model_output_gives_failed_rows(overflow_folder: Path) -> None:
    from hexamer import Carbon

    rows = saturation_mutagenesis(
        Carbon.from_pretrained(overflow_folder), FASTA, region="20:60301-60304", **WINDOW
    )
    assert len(rows) == 4 * 3 and {r["status"] for r in rows} == {"failed"}
    assert all(r["score"] is None and "non-finite score" in r["reason"] for r in rows)
