"""The VEP benchmark times the engine and the naive recipe on the same variants and checks they agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.bench.vep import bench_vep
from hexamer.synthetic.vcf import write_random_vcf
from tests.vep.conftest import FASTA

TOL = 1e-4


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def test_bench_vep_reports_both_runs(carbon: Carbon, tmp_path: Path) -> None:
    vcf = tmp_path / "sat.vcf"
    write_random_vcf(FASTA, vcf, n_sites=4, alts_per_site=3, region=("20", 200_000, 210_000), seed=1)
    result = bench_vep(carbon, vcf, FASTA, recipe="window", window=600)
    assert result.n_variants == 12
    assert result.max_abs_diff < TOL
    assert result.engine_s > 0 and result.naive_s > 0
    assert np.isclose(result.speedup, result.naive_s / result.engine_s)


def test_run_vep_bench_refuses_wrong_options_before_loading_a_model(tiny_folder: Path) -> None:
    from hexamer.bench.common import BenchOptionError
    from hexamer.bench.vep import run_vep_bench

    with pytest.raises(BenchOptionError, match="nope"):
        run_vep_bench(model=str(tiny_folder), recipes=("nope",))
    with pytest.raises(BenchOptionError, match="--fasta"):
        run_vep_bench(model=str(tiny_folder), vcf=Path("calls.vcf"))
