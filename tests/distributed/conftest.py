"""A local two-CPU Ray cluster shared by this package's tests (Ray starts once: about 5 s)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
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
