"""A local two-CPU Ray cluster shared by this package's tests (Ray starts once: about 5 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hexamer.testing.vcf import write_random_vcf

ray = pytest.importorskip("ray")

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
EDGE_VCF = DATA / "edge_cases.vcf"
#: small engine blocks so a 30-record VCF makes several shards
SETTINGS = {"recipe": "window", "window": 600, "batch_size": 4, "block_records": 4}


@pytest.fixture(scope="package")
def local_ray() -> Iterator[None]:
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="package")
def job_vcf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 sites of 1-2 SNV ALTs plus the real edge cases (malformed, symbolic, unknown contig...)."""
    path = tmp_path_factory.mktemp("vcf") / "job.vcf"
    write_random_vcf(FASTA, path, n_sites=24, alts_per_site=2, region=("20", 300_000, 330_000), seed=5)
    edge = [line for line in EDGE_VCF.read_text().splitlines() if not line.startswith("#")]
    head = [line for line in path.read_text().splitlines() if line.startswith("##")]
    body = [line for line in path.read_text().splitlines() if not line.startswith("##")]
    extra = [line for line in EDGE_VCF.read_text().splitlines() if line.startswith("##") and "contig" in line]
    path.write_text("\n".join([*head, *extra[1:], *body, *edge]) + "\n")
    return path
