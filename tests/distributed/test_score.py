"""hexamer.distributed.score and hexamer score --ray: the command's table byte for byte, with
faults; every record appears."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer.distributed import FaultPlan, run_folder, score
from hexamer.testing.cli import run_json
from hexamer.testing.interrupts import kill_after

from .conftest import pool_fixture, write_random_fasta

BATCH = 16  # hexamer score's default --batch-size, which the actors load the model with


pool = pool_fixture(2, BATCH)


@pytest.fixture(scope="module")
def reads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """520 sequences of 12-60 bp (three chunks of 256), with an all-N and a non-DNA record."""
    path = tmp_path_factory.mktemp("reads") / "reads.fa"
    special = {7: "ACGTXYZ", 300: "NNNNNNNNNNNN"}
    return write_random_fasta(path, 520, (12, 60), seed=3, prefix="r", special=special)


@pytest.fixture(scope="module")
def single(reads: Path, tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("single")
    outs = {}
    for ext, extra in (("tsv", []), ("jsonl", ["--per-base"]), ("parquet", ["--per-base"])):
        outs[ext] = folder / f"scores.{ext}"
        run_json(["score", "-i", reads, "-o", outs[ext], "-m", tiny_folder, *extra])
    return outs


@pytest.mark.parametrize(
    ("workers", "shard_records", "ext"),
    [(1, 256, "tsv"), (2, 512, "jsonl"), (2, 256, "parquet"), (1, 1024, "parquet")],
)
def test_table_is_byte_identical(pool, reads, single, tmp_path, workers, shard_records, ext) -> None:
    out = tmp_path / f"scores.{ext}"
    result = score(
        None, reads, out, pool=pool.limited(workers), shard_records=shard_records, per_base=ext != "tsv"
    )
    assert out.read_bytes() == single[ext].read_bytes()
    assert result.n_records == 520
    assert result.status_counts["ok"] >= 510
    assert not run_folder(out).exists()


def test_killed_actor_and_killed_driver(pool, reads, single, tmp_path) -> None:
    out = tmp_path / "scores.parquet"
    stop = kill_after(256, KeyboardInterrupt)  # the driver stops after its first shard
    with pytest.raises(KeyboardInterrupt):
        score(None, reads, out, pool=pool, shard_records=256, per_base=True, on_progress=stop)
    result = score(
        None,
        reads,
        out,
        pool=pool,
        shard_records=256,
        per_base=True,
        resume=True,
        fault=FaultPlan(exit_in_shard=2, once_file=str(tmp_path / "exited")),
    )
    assert (tmp_path / "exited").exists()
    assert result.n_resumed >= 256
    assert out.read_bytes() == single["parquet"].read_bytes()


def test_a_poisoned_shard_becomes_failed_rows(pool, reads, single, tmp_path) -> None:
    out = tmp_path / "scores.parquet"
    result = score(
        None, reads, out, pool=pool, shard_records=256, per_base=True, fault=FaultPlan(raise_in_shard=1)
    )
    got = pq.read_table(out).to_pylist()
    want = pq.read_table(single["parquet"]).to_pylist()
    assert [r["id"] for r in got] == [r["id"] for r in want]
    assert all(r["status"] == "failed" and "InjectedFault" in r["error"] for r in got[256:512])
    assert got[:256] == want[:256] and got[512:] == want[512:]
    assert result.status_counts["failed"] >= 256


def test_shards_must_be_whole_chunks(pool, reads, tmp_path) -> None:
    with pytest.raises(ValueError, match="multiple of 256"):
        score(None, reads, tmp_path / "s.tsv", pool=pool, shard_records=100)


@pytest.mark.slow  # starts a second pool; the vep CLI test covers --ray in-process
def test_cli_score_on_ray_writes_the_same_table(pool, reads, single, tiny_folder, tmp_path) -> None:
    out = tmp_path / "scores.parquet"
    summary = run_json(
        [
            "score",
            "-i",
            reads,
            "-o",
            out,
            "-m",
            tiny_folder,
            "--per-base",
            "--ray",
            "auto",
            "--shard-records",
            "256",
        ]
    )
    assert out.read_bytes() == single["parquet"].read_bytes()
    assert summary["n_records"] == 520
    again = run_json(
        ["score", "-i", reads, "-o", out, "-m", tiny_folder, "--per-base", "--ray", "auto", "--resume"]
    )
    assert again["n_records"] == 520
