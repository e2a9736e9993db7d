"""A local two-CPU Ray cluster shared by this package's tests (Ray starts once: about 5 s)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hexamer.distributed import PoolSpec, WorkerPool, run_folder
from hexamer.testing.interrupts import Killed, kill_after

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


def pool_fixture(workers: int, batch_size: int) -> Any:
    """A module's ``pool`` fixture: ``workers`` tiny-model actors loading the model with the job's
    ``batch_size`` (as the command loads it, so the outputs can be equal), stopped after the module."""

    @pytest.fixture(scope="module")
    def pool(local_ray: None, tiny_folder: Path) -> Iterator[WorkerPool]:
        with WorkerPool(tiny_folder, PoolSpec(workers=workers), batch_size=batch_size) as started:
            yield started

    return pool


def stopped(job: Callable[..., Any], workers: int, rows: int) -> None:
    """Run ``job(workers, on_progress=...)`` until ``rows`` rows are done, then stop it as a kill would."""
    with pytest.raises(Killed):
        job(workers, on_progress=kill_after(rows))


def resumed_after_kill(job: Callable[..., Any], out: Path, rows: int) -> tuple[Any, int]:
    """``job(workers, **options)`` on 2 workers killed after ``rows`` rows (no output written),
    then resumed on 3: the resumed run's result and the rows the killed run had committed."""
    stopped(job, 2, rows)
    assert not out.exists()
    committed = committed_rows(out)
    return job(3, resume=True), committed


def write_random_fasta(
    path: Path, n: int, lengths: tuple[int, int], *, seed: int, prefix: str, special: Mapping[int, str]
) -> Path:
    """``n`` random A/C/G/T records named ``{prefix}{i}`` of ``lengths`` (inclusive) bases, but
    record ``i`` of ``special`` is that sequence instead (a bad record, all-N, ...)."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        seq = "".join(rng.choice("ACGT") for _ in range(rng.randint(*lengths)))
        lines += [f">{prefix}{i}", special.get(i, seq)]
    path.write_text("\n".join(lines) + "\n")
    return path


def committed_rows(out: Path) -> int:
    """The rows in the committed (Parquet) shards of ``out``'s run folder; fails when there are none."""
    shards = sorted(run_folder(out).glob("shard-*"))
    assert shards, f"no committed shard in {run_folder(out)}"
    return sum(pq.read_metadata(p).num_rows for p in shards)
