"""The background: seeded region sampling, and a reproducible table made with the tiny model."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.calibration import calibrate, sample_regions
from hexamer.calibration.table import CalibrationMismatch
from hexamer.io.reference import Reference
from hexamer.ism import ism_settings, saturation_mutagenesis

FASTA = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.fa.gz"
warnings.filterwarnings("ignore", category=UserWarning, module="hexamer")


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def test_sample_regions_seeded_and_mostly_acgt() -> None:
    with Reference(FASTA) as ref:
        a = sample_regions(ref, 5, 50, seed=1)
        assert a == sample_regions(ref, 5, 50, seed=1) and a != sample_regions(ref, 5, 50, seed=2)
        for r in a:
            seq = ref.fetch(r.contig, r.start, r.end)
            assert r.length == 50 and sum(seq.count(b) for b in "ACGT") >= 25  # the N gap is avoided
        with pytest.raises(ValueError, match="n_regions"):
            sample_regions(ref, 0, 50)
        with pytest.raises(ValueError, match="region_bp"):
            sample_regions(ref, 1, 10**9)


def test_calibrate_reproducible_and_refused_for_another_model(carbon, tmp_path) -> None:
    settings = ism_settings(window=240)
    a = calibrate(carbon, FASTA, settings, n_regions=2, region_bp=6, seed=4)
    b = calibrate(carbon, FASTA, settings, n_regions=2, region_bp=6, seed=4)
    assert a.n_scores == 36 and a.thresholds == b.thresholds and a.phreds == b.phreds
    path = tmp_path / "cal.json"
    a.save(path)
    rows = saturation_mutagenesis(carbon, FASTA, region="20:60301-60303", window=240, calibration=a)
    assert all(r["phred"] is not None and r["phred"] >= 0 for r in rows)
    worst = min(rows, key=lambda r: r["score"])  # window: most negative = most deleterious
    assert worst["phred"] == max(r["phred"] for r in rows)
    a.model = "another-model"
    with pytest.raises(CalibrationMismatch, match="model fingerprint"):
        saturation_mutagenesis(carbon, FASTA, region="20:60301-60303", window=240, calibration=a)
