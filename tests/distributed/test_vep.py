"""hexamer.distributed.run_vep: the single-process output byte for byte, whatever the workers,
shard size or faults; resume after a killed driver; a poisoned shard becomes failed rows."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer import Carbon
from hexamer.distributed import FaultPlan, run_folder, run_vep, single_process_command
from hexamer.vep import run_vep as run_vep_single
from hexamer.vep.job import ResumeError

from .conftest import FASTA, SETTINGS, pool_fixture, resumed_after_kill, stopped

EXTS = ("vcf", "vcf.gz", "bcf", "tsv", "csv", "jsonl", "parquet")


pool = pool_fixture(3, SETTINGS["batch_size"])  # 1.5 of the 2 CPUs


@pytest.fixture(scope="module")
def single(tiny_folder: Path, job_vcf: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The single-process output in every format (the model loaded as the actors load it)."""
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=SETTINGS["batch_size"])
    folder = tmp_path_factory.mktemp("single")
    outs = {}
    for ext in EXTS:
        outs[ext] = folder / f"out.{ext}"
        run_vep_single(carbon, job_vcf, FASTA, outs[ext], on_note=lambda _: None, **SETTINGS)
    return outs


def _run(pool, job_vcf: Path, out: Path, workers: int, shard_records: int, **kw):
    return run_vep(
        None,
        job_vcf,
        FASTA,
        out,
        pool=pool.limited(workers),
        shard_records=shard_records,
        on_note=kw.pop("on_note", lambda _: None),
        **kw,
        **SETTINGS,
    )


@pytest.mark.parametrize(
    ("workers", "shard_records", "ext"),
    [
        (1, 4, "vcf"),
        (2, 8, "vcf.gz"),
        (3, 4, "bcf"),
        (2, 12, "tsv"),
        (3, 8, "parquet"),
        (1, 12, "csv"),
        (2, 4, "jsonl"),
        (3, 400, "vcf"),
    ],
)
def test_output_is_byte_identical(pool, job_vcf, single, tmp_path, workers, shard_records, ext) -> None:
    out = tmp_path / f"out.{ext}"
    result = _run(pool, job_vcf, out, workers, shard_records)
    assert out.read_bytes() == single[ext].read_bytes()
    assert not run_folder(out).exists()  # the committed shards are removed once merged
    assert result.n_rows == sum(result.status_counts.values())
    assert {"ok", "skipped", "ref_mismatch"} <= set(result.status_counts)


def test_a_killed_actor_is_restarted_and_the_output_is_identical(pool, job_vcf, single, tmp_path) -> None:
    once = tmp_path / "exited"
    out = tmp_path / "out.vcf.gz"
    _run(pool, job_vcf, out, 2, 4, fault=FaultPlan(exit_in_shard=2, once_file=str(once)))
    assert once.exists()  # the worker really exited in shard 2
    assert out.read_bytes() == single["vcf.gz"].read_bytes()


def test_resume_after_a_killed_driver_skips_committed_shards(pool, job_vcf, single, tmp_path) -> None:
    out = tmp_path / "out.parquet"
    result, committed = resumed_after_kill(partial(_run, pool, job_vcf, out, shard_records=4), out, 20)
    assert result.n_resumed == committed
    assert out.read_bytes() == single["parquet"].read_bytes()


def test_resume_verifies_checksums(pool, job_vcf, single, tmp_path) -> None:
    out = tmp_path / "out.tsv"
    stopped(partial(_run, pool, job_vcf, out, shard_records=4), 1, 1)
    shard = sorted(run_folder(out).glob("shard-*"))[0]
    shard.write_bytes(shard.read_bytes()[:-8] + b"corrupt!")
    notes: list[str] = []
    result = _run(pool, job_vcf, out, 3, 4, resume=True, on_note=notes.append)
    assert result.n_resumed == 0
    assert any("corrupt" in n for n in notes)
    assert out.read_bytes() == single["tsv"].read_bytes()


def test_resume_refuses_another_job(pool, job_vcf, tmp_path) -> None:
    out = tmp_path / "out.tsv"
    stopped(partial(_run, pool, job_vcf, out, shard_records=4), 1, 1)
    with pytest.raises(ResumeError, match="shard_records"):
        _run(pool, job_vcf, out, 1, 8, resume=True)


def test_resume_refuses_an_edited_input(pool, job_vcf, tmp_path) -> None:
    """The input is known by size, mtime and sampled bytes (as a single-process job knows it)."""
    vcf = tmp_path / "calls.vcf"
    vcf.write_bytes(job_vcf.read_bytes())
    out = tmp_path / "out.tsv"
    stopped(partial(_run, pool, vcf, out, shard_records=4), 1, 1)
    stat = vcf.stat()
    os.utime(vcf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # same bytes, touched
    with pytest.raises(ResumeError, match=r"different job \(changed: vcf\)"):
        _run(pool, vcf, out, 1, 4, resume=True)


def test_a_poisoned_shard_becomes_failed_rows(pool, job_vcf, single, tmp_path) -> None:
    out = tmp_path / "out.parquet"
    notes: list[str] = []
    result = _run(pool, job_vcf, out, 2, 4, fault=FaultPlan(raise_in_shard=1), on_note=notes.append)
    got = pq.read_table(out).to_pylist()
    want = pq.read_table(single["parquet"]).to_pylist()
    assert [(r["record"], r["alt_index"]) for r in got] == [(r["record"], r["alt_index"]) for r in want]
    poisoned = [r for r in got if 4 <= r["record"] < 8]
    assert poisoned and all(r["status"] == "failed" for r in poisoned)
    assert all("InjectedFault" in r["reason"] and "3 times" in r["reason"] for r in poisoned)
    assert [r for r in got if not 4 <= r["record"] < 8] == [r for r in want if not 4 <= r["record"] < 8]
    assert result.n_rows == len(want)
    assert any("records 4-7" in n for n in notes)


def test_shards_must_be_whole_engine_blocks(pool, job_vcf, tmp_path) -> None:
    with pytest.raises(ValueError, match="multiple of block_records"):
        _run(pool, job_vcf, tmp_path / "out.tsv", 1, 6)


def test_single_process_command_leaves_out_the_scale_out_options() -> None:
    argv = [
        "/usr/bin/hexamer",
        "vep",
        "--ray",
        "auto",
        "--workers=4",
        "--vcf",
        "a.vcf",
        "--shard-records",
        "8",
    ]
    assert single_process_command(argv) == "hexamer vep --vcf a.vcf"
