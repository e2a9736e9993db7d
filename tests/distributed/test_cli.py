"""hexamer vep --ray: the same file as without it; clear errors for what cannot work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hexamer.testing.cli import error_message, run, run_json

from .conftest import FASTA


def _vep(vcf: Path, out: Path, model: Path, *extra: str) -> list[str]:
    return [
        "vep",
        "--vcf",
        vcf,
        "--fasta",
        FASTA,
        "-o",
        out,
        "-m",
        model,
        "--window",
        "600",
        "--batch-size",
        "4",
        *extra,
    ]


def test_vep_on_ray_writes_the_single_process_file(local_ray, job_vcf, tiny_folder, tmp_path) -> None:
    # the same output name: the command line is part of a VCF's provenance header
    single, scaled = tmp_path / "single", tmp_path / "ray"
    single.mkdir()
    scaled.mkdir()
    a = run_json(_vep(job_vcf, single / "out.vcf.gz", tiny_folder))
    b = run_json(_vep(job_vcf, scaled / "out.vcf.gz", tiny_folder, "--ray", "auto", "--workers", "2"))
    assert (scaled / "out.vcf.gz").read_bytes() == (single / "out.vcf.gz").read_bytes()
    assert a["status_counts"] == b["status_counts"]


def test_shards_of_part_of_a_block_are_refused(job_vcf, tiny_folder, tmp_path) -> None:
    result = run(_vep(job_vcf, tmp_path / "o.tsv", tiny_folder, "--ray", "auto", "--shard-records", "1000"))
    assert result.exit_code == 2


def test_ray_and_server_are_exclusive(job_vcf, tiny_folder, tmp_path) -> None:
    args = _vep(job_vcf, tmp_path / "o.tsv", tiny_folder, "--ray", "auto", "--server", "http://localhost:1")
    assert run(args).exit_code == 2


def test_without_ray_the_error_says_how_to_install_it(job_vcf, tiny_folder, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    result = run(_vep(job_vcf, tmp_path / "o.tsv", tiny_folder, "--ray", "auto"))
    assert result.exit_code == 2
    assert "pip install 'hexamer[ray]'" in error_message(result)


def test_a_pool_larger_than_the_cluster_is_refused(local_ray, tiny_folder) -> None:
    from hexamer.distributed import PoolSpec, WorkerPool

    with pytest.raises(ValueError, match="the Ray cluster has 2"):
        WorkerPool(tiny_folder, PoolSpec(workers=5, threads=1))  # 5 x 0.5 CPU > 2


def test_a_pool_that_fits_but_finds_the_cpus_taken_is_refused(local_ray, tiny_folder, monkeypatch) -> None:
    from hexamer.distributed import PoolSpec, WorkerPool, cluster

    monkeypatch.setattr(cluster, "ROOM_WAIT_SECONDS", 1.0)
    # 4 x 0.5 CPU hold all of the cluster's 2; the second pool would otherwise wait forever
    with (
        WorkerPool(tiny_folder, PoolSpec(workers=4)),
        pytest.raises(ValueError, match="only 0 are free"),
    ):
        WorkerPool(tiny_folder, PoolSpec(workers=1))


@pytest.mark.parametrize("command", ["score", "embed"])
def test_resume_of_score_and_embed_needs_ray(command, tiny_folder, tmp_path) -> None:
    reads = tmp_path / "r.fa"
    reads.write_text(">a\nACGTACGT\n")
    out = tmp_path / ("o.tsv" if command == "score" else "o.parquet")
    assert run([command, "-i", reads, "-o", out, "-m", tiny_folder, "--resume"]).exit_code == 2
