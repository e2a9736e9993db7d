"""hexamer.distributed.run_effects: a head's variant effects on Ray actors, byte for byte the
single-process output (hexamer.finetune.effects.run_effects); resume after a killed driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.distributed import PoolSpec, WorkerPool
from hexamer.distributed.effects import run_effects
from hexamer.finetune.apply import Predictor, read_head_settings
from hexamer.finetune.effects import effect_settings
from hexamer.finetune.effects import run_effects as run_effects_single
from hexamer.testing.heads import build_head_folder

from .conftest import FASTA, resumed_after_kill

pytestmark = pytest.mark.slow  # starts a pool of its own (about 40 s on a busy two-core machine)

EXTS = ("vcf.gz", "tsv", "parquet")
BATCH = 4


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("heads") / "bin"
    return build_head_folder(folder, kind="binary", max_length=90, rc_average=True)


@pytest.fixture(scope="module")
def settings(head: Path):
    """Small engine blocks so the job VCF makes several shards."""
    return effect_settings(read_head_settings(head), batch_size=BATCH, block_records=4)


@pytest.fixture(scope="module")
def pool(local_ray: None, head: Path):
    with WorkerPool(head, PoolSpec(workers=2), batch_size=BATCH) as started:
        yield started


@pytest.fixture(scope="module")
def single(head: Path, settings, job_vcf: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    predictor = Predictor.load(head, batch_size=BATCH)
    folder = tmp_path_factory.mktemp("single")
    outs = {}
    for ext in EXTS:
        outs[ext] = folder / f"out.{ext}"
        run_effects_single(predictor, job_vcf, FASTA, outs[ext], settings=settings, on_note=lambda _: None)
    return outs


def _run(pool, job_vcf: Path, settings, out: Path, workers: int, shard_records: int, **kw):
    return run_effects(
        pool.model,
        job_vcf,
        FASTA,
        out,
        pool=pool.limited(workers),
        shard_records=shard_records,
        settings=settings,
        command=kw.pop("command", None),
        on_note=lambda _: None,
        **kw,
    )


@pytest.mark.parametrize(
    ("workers", "shard_records", "ext"), [(2, 4, "vcf.gz"), (1, 8, "tsv"), (2, 12, "parquet")]
)
def test_output_is_byte_identical(
    pool, job_vcf, settings, single, tmp_path, workers, shard_records, ext
) -> None:
    out = tmp_path / f"out.{ext}"
    result = _run(pool, job_vcf, settings, out, workers, shard_records)
    assert out.read_bytes() == single[ext].read_bytes()
    assert {"ok", "skipped", "ref_mismatch"} <= set(result.status_counts)


def test_resume_after_a_killed_driver(pool, job_vcf, settings, single, tmp_path) -> None:
    out = tmp_path / "out.tsv"

    def job(workers: int, **kw):
        return _run(pool, job_vcf, settings, out, min(workers, 2), 4, **kw)

    result, committed = resumed_after_kill(job, out, 20)
    assert committed > 0 and result.n_resumed == committed
    assert out.read_bytes() == single["tsv"].read_bytes()


def test_predict_on_ray_writes_the_single_process_file(pool, job_vcf, head, tmp_path) -> None:
    from hexamer.testing.cli import run_json

    single, scaled = tmp_path / "single", tmp_path / "ray"  # the same output name: provenance holds it
    single.mkdir()
    scaled.mkdir()
    args = ["predict", "-m", head, "--vcf", job_vcf, "--fasta", FASTA, "--batch-size", "4"]
    a = run_json([*args, "-o", single / "out.vcf.gz"])
    b = run_json([*args, "-o", scaled / "out.vcf.gz", "--ray", "auto", "--workers", "1"])
    assert (scaled / "out.vcf.gz").read_bytes() == (single / "out.vcf.gz").read_bytes()
    assert a["status_counts"] == b["status_counts"] and a["columns"] == b["columns"] == ["p_neg", "p_pos"]
