"""hexamer.distributed.generate and hexamer generate --ray: the command's file byte for byte for
the same seed, every record and sample in it, a killed run resumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.distributed import FaultPlan, generate, run_folder
from hexamer.generation_job import GenerationSettings
from hexamer.testing.cli import run, run_json, usage_error

from .conftest import pool_fixture, write_random_fasta

BATCH = 16  # hexamer generate's default --batch-size, which the actors load the model with
N = 32  # samples per prompt: 256 // 32 = 8 records per engine call, so 20 records make 3 chunks
ARGS = ["--max-bp", "9", "--n", str(N), "--seed", "11", "--stop", "GGG"]
SETTINGS = GenerationSettings(max_bp=9, n=N, seed=11, stop=("GGG",))

pool = pool_fixture(2, BATCH)


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 prompts of 6-30 bp, one of them not DNA."""
    path = tmp_path_factory.mktemp("prompts") / "prompts.fa"
    return write_random_fasta(path, 20, (6, 30), seed=5, prefix="p", special={3: "ACGTXYZ"})


@pytest.fixture(scope="module")
def single(prompts: Path, tiny_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("single")
    outs = {}
    for ext, extra in (("fa", []), ("parquet", ["--logprobs"])):
        outs[ext] = folder / f"gens.{ext}"
        run_json(["generate", "-i", prompts, "-o", outs[ext], "-m", tiny_folder, *ARGS, *extra])
    return outs


@pytest.mark.parametrize(("workers", "shard_records", "ext"), [(2, 8, "parquet"), (1, 16, "fa")])
def test_file_is_byte_identical(pool, prompts, single, tmp_path, workers, shard_records, ext) -> None:
    out = tmp_path / f"gens.{ext}"
    settings = GenerationSettings(**{**SETTINGS.as_dict(), "stop": SETTINGS.stop, "logprobs": ext != "fa"})
    result = generate(
        None, prompts, out, settings=settings, pool=pool.limited(workers), shard_records=shard_records
    )
    assert out.read_bytes() == single[ext].read_bytes()
    assert result.n_records == 20
    assert result.status_counts == {"ok": 19, "skipped": 1}
    assert not run_folder(out).exists()


def test_a_shard_that_keeps_failing_gives_failed_rows(pool, prompts, tmp_path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "gens.parquet"
    fault = FaultPlan(raise_in_shard=1)
    result = generate(
        None, prompts, out, settings=SETTINGS, pool=pool, shard_records=8, max_attempts=1, fault=fault
    )
    table = pq.read_table(out).to_pylist()
    assert len(table) == 20 * N  # every record and sample appears
    assert result.status_counts["failed"] == 8
    assert all(r["status"] == "failed" for r in table[8 * N : 16 * N])


def test_shards_of_part_of_a_chunk_are_refused(pool, prompts, tmp_path) -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        generate(None, prompts, tmp_path / "g.fa", settings=SETTINGS, pool=pool, shard_records=12)


def test_cli_refuses_what_ray_cannot_do(prompts, tiny_folder, tmp_path) -> None:
    base = ["generate", "-m", tiny_folder, *ARGS, "--ray", "auto"]
    assert run([*base, "ACGTAC", "-o", tmp_path / "g.fa"]).exit_code == 2  # prompts on the command line
    assert run([*base, "-i", prompts]).exit_code == 2  # standard output
    with_draft = usage_error([*base, "-i", prompts, "-o", tmp_path / "g.fa", "--draft", tiny_folder])
    assert "--ray takes no --draft" in with_draft.format_message()
    bad_shard = usage_error([*base, "-i", prompts, "-o", tmp_path / "g.fa", "--shard-records", "12"])
    assert "multiple of 8" in bad_shard.format_message()
    assert run(["generate", "-m", tiny_folder, "ACGTAC", "--resume"]).exit_code == 2  # --resume needs --ray


@pytest.mark.slow  # starts a pool of its own
def test_cli_generate_on_ray_writes_the_same_file(local_ray, prompts, single, tiny_folder, tmp_path) -> None:
    out = tmp_path / "gens.parquet"
    args = ["generate", "-i", prompts, "-o", out, "-m", tiny_folder, *ARGS, "--logprobs", "--ray", "auto"]
    summary = run_json([*args, "--shard-records", "8"])
    assert out.read_bytes() == single["parquet"].read_bytes()
    assert summary["n_records"] == 20 and summary["status_counts"] == {"ok": 19, "skipped": 1}
    assert summary["n_samples"] == N
    again = run_json([*args, "--resume"])
    assert again["n_records"] == 20
