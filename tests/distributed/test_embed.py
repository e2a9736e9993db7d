"""hexamer.distributed.embed and hexamer embed --ray: the command's file byte for byte (shards end
on embedding-group boundaries), with faults; every record appears."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from hexamer.distributed import FaultPlan, embed, run_folder
from hexamer.distributed.embed import group_shards
from hexamer.embed.pooling import GROUP_PROMPTS
from hexamer.testing.cli import run_json
from hexamer.testing.interrupts import kill_after

from .conftest import pool_fixture, write_random_fasta

BATCH = 8  # hexamer embed's default --batch-size, which the actors load the model with
CHUNKED = ["--max-tokens", "64"]  # ~370 bp per chunk: long records take several prompts


pool = pool_fixture(2, BATCH)


@pytest.fixture(scope="module")
def seqs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """160 sequences of 20-1,500 bp (1-5 prompts each), one of them not DNA."""
    path = tmp_path_factory.mktemp("seqs") / "seqs.fa"
    return write_random_fasta(path, 160, (20, 1500), seed=4, prefix="s", special={11: "ACGT-XYZ"})


@pytest.fixture(scope="module")
def single(seqs: Path, tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("single")
    outs = {}
    for ext in ("parquet", "npy"):
        outs[ext] = folder / f"emb.{ext}"
        run_json(["embed", "-i", seqs, "-o", outs[ext], "-m", tiny_folder, *CHUNKED])
    return outs


def _embed(pool, seqs: Path, out: Path, workers: int, shard_records: int, **kw):
    return embed(
        None, seqs, out, pool=pool.limited(workers), shard_records=shard_records, max_tokens=64, **kw
    )


@pytest.mark.parametrize(
    ("workers", "shard_records", "ext"), [(1, 10, "parquet"), (2, 40, "parquet"), (2, 1, "npy")]
)
def test_file_is_byte_identical(pool, seqs, single, tmp_path, workers, shard_records, ext) -> None:
    out = tmp_path / f"emb.{ext}"
    result = _embed(pool, seqs, out, workers, shard_records)
    assert out.read_bytes() == single[ext].read_bytes()
    if ext == "npy":
        ids = out.with_name("emb.ids.txt")
        assert ids.read_bytes() == single[ext].with_name("emb.ids.txt").read_bytes()
    assert result.n_records == 160
    assert len(result.errors) == 1
    assert not run_folder(out).exists()


def test_killed_driver_then_resume(pool, seqs, single, tmp_path) -> None:
    """The embed-specific part of the drill: a driver killed mid-run resumes byte for byte (an
    actor restart is the shared scheduler's, drilled fast by the vep, score and ism tests)."""
    out = tmp_path / "emb.parquet"
    with pytest.raises(KeyboardInterrupt):
        _embed(pool, seqs, out, 2, 20, on_progress=kill_after(40, KeyboardInterrupt))
    result = _embed(pool, seqs, out, 2, 20, resume=True)
    assert result.n_resumed >= 20
    assert out.read_bytes() == single["parquet"].read_bytes()


@pytest.mark.slow  # an actor's cold restart (torch, hexamer and the model loaded again): ~30 s
def test_killed_actor_then_killed_driver_then_resume(pool, seqs, single, tmp_path) -> None:
    out = tmp_path / "emb.parquet"
    once = FaultPlan(exit_in_shard=1, once_file=str(tmp_path / "exited"))
    with pytest.raises(KeyboardInterrupt):
        _embed(pool, seqs, out, 2, 20, on_progress=kill_after(40, KeyboardInterrupt), fault=once)
    assert (tmp_path / "exited").exists()  # a worker really died in shard 1
    result = _embed(pool, seqs, out, 2, 20, resume=True)
    assert result.n_resumed >= 20
    assert out.read_bytes() == single["parquet"].read_bytes()


def test_a_poisoned_shard_has_no_vectors_and_says_why(pool, seqs, single, tmp_path) -> None:
    out = tmp_path / "emb.parquet"
    _embed(pool, seqs, out, 2, 30, fault=FaultPlan(raise_in_shard=1))
    got = pq.read_table(out).to_pylist()
    want = pq.read_table(single["parquet"]).to_pylist()
    assert [r["id"] for r in got] == [r["id"] for r in want]
    failed = [r for r in got if r["embedding"] is None and "InjectedFault" in (r["error"] or "")]
    assert len(failed) >= 30
    ok = [(g, w) for g, w in zip(got, want, strict=True) if g["embedding"] is not None]
    assert all(np.array_equal(g["embedding"], w["embedding"]) for g, w in ok)


def test_shards_end_where_embedding_groups_end() -> None:
    counts = [3] * 50  # a group ends every 22 records (66 prompts >= 64)
    shards = list(group_shards(iter(range(50)), 5, lambda i: counts[i]))
    ends = [s.first + len(s.records) for s in shards]
    assert ends == [22, 44, 50]
    assert all(sum(counts[s.first : s.first + len(s.records)]) >= GROUP_PROMPTS for s in shards[:-1])
