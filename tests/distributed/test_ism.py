"""hexamer.distributed.ism and hexamer ism --ray: the single-process files byte for byte, whatever
the workers or shard size; a killed actor, a killed driver (resume), a poisoned shard (failed
rows), calibration on the driver, site mode."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hexamer import Carbon
from hexamer.calibration import CalibrationMismatch, calibrate
from hexamer.distributed import FaultPlan, WorkerPool, ism, run_folder
from hexamer.distributed.ism import ism_shards
from hexamer.io.reference import Reference
from hexamer.ism import ism_settings, write_ism
from hexamer.ism.mutagenesis import iter_mutagenesis, region_list, site_list
from hexamer.ism.variants import ism_records
from hexamer.testing.cli import error_message, run, run_json

from .conftest import FASTA, pool_fixture, resumed_after_kill, stopped

BATCH = 4
#: engine blocks of 4 records, so 50 bases make a dozen shards
SETTINGS = replace(ism_settings(window=240, batch_size=BATCH), block_records=4)
REGIONS = ["a:581-610", "b:11-30"]
EXTS = ("tsv", "csv", "jsonl", "parquet", "tsv.bgz")
SITES_VCF = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.vcf"


@pytest.fixture(scope="module")
def fasta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two random contigs; ``a`` has an IUPAC code (skipped before scoring, so shards must count
    scored records only) and an N (skipped by the engine) inside the region."""
    rng = random.Random(11)
    a = [rng.choice("ACGT") for _ in range(1200)]
    a[589], a[600] = "R", "N"
    b = "".join(rng.choice("ACGT") for _ in range(800))
    path = tmp_path_factory.mktemp("ism-fasta") / "ref.fa"
    path.write_text(f">a\n{''.join(a)}\n>b\n{b}\n")
    return path


pool = pool_fixture(3, BATCH)  # 1.5 of the 2 CPUs


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder, max_batch_size=BATCH)


def _single_rows(carbon: Carbon, fasta: Path, *, indels: bool = False, calibration=None) -> list[dict]:
    with Reference(fasta) as reference:
        regions = region_list(REGIONS, reference)
        return list(
            iter_mutagenesis(
                carbon,
                reference,
                regions,
                SETTINGS,
                indels=indels,
                calibration=calibration,
                on_note=lambda _: None,
            )
        )


def _write_all(rows: list[dict], folder: Path) -> dict[str, Path]:
    folder.mkdir()
    outs = {}
    for ext in EXTS:
        outs[ext] = folder / f"ism.{ext}"
        write_ism(outs[ext], rows)
    return outs


@pytest.fixture(scope="module")
def single(
    carbon: Carbon, fasta: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[bool, dict[str, Path]]:
    """The single-process files in every format, without and with indels."""
    base = tmp_path_factory.mktemp("single")
    return {
        indels: _write_all(_single_rows(carbon, fasta, indels=indels), base / f"indels-{indels}")
        for indels in (False, True)
    }


def _ism(pool: WorkerPool, fasta: Path, out: Path, workers: int = 2, shard_records: int = 4, **kw):
    return ism(
        None,
        fasta,
        out,
        region=kw.pop("region", REGIONS),
        pool=pool.limited(workers),
        shard_records=shard_records,
        settings=SETTINGS,
        on_note=kw.pop("on_note", lambda _: None),
        **kw,
    )


def _same_file(got: Path, want: Path) -> None:
    assert got.read_bytes() == want.read_bytes()
    if got.name.endswith(".tsv.bgz"):
        assert Path(f"{got}.tbi").read_bytes() == Path(f"{want}.tbi").read_bytes()


def test_shards_count_scored_records_and_keep_skipped_bases_in_place(fasta: Path) -> None:
    with Reference(fasta) as reference:
        items = list(ism_records(reference, region_list("a:585-596", reference)))
    assert [it.skip is not None for it in items].count(True) == 1  # the R at 590
    shards = list(ism_shards(items, 4))
    assert [len([i for i in s.records if i.skip is None]) for s in shards] == [4, 4, 3]
    assert [s.first for s in shards] == [0, 4, 9]  # the skipped base rides with the shard before it
    assert [i for s in shards for i in s.records] == items


@pytest.mark.parametrize(
    ("workers", "shard_records", "ext", "indels"),
    [
        (1, 4, "tsv", False),
        (2, 4, "parquet", False),
        (3, 8, "tsv.bgz", False),
        (2, 8, "jsonl", True),
        (3, 4, "csv", True),
        (2, 400, "parquet", True),
    ],
)
def test_files_are_byte_identical(pool, fasta, single, tmp_path, workers, shard_records, ext, indels) -> None:
    out = tmp_path / f"ism.{ext}"
    result = _ism(pool, fasta, out, workers, shard_records, indels=indels)
    _same_file(out, single[indels][ext])
    assert not run_folder(out).exists()  # the committed shards are removed once merged
    assert {"ok", "skipped"} <= set(result.status_counts)
    assert result.n_written == (result.status_counts["ok"] if ext == "tsv.bgz" else len(result.rows))


def test_a_killed_actor_is_restarted_and_the_file_is_identical(pool, fasta, single, tmp_path) -> None:
    once = tmp_path / "exited"
    out = tmp_path / "ism.tsv.bgz"
    _ism(pool, fasta, out, 2, 4, fault=FaultPlan(exit_in_shard=2, once_file=str(once)))
    assert once.exists()  # the worker really exited in shard 2
    _same_file(out, single[False]["tsv.bgz"])


def test_resume_after_a_killed_driver_skips_committed_shards(pool, fasta, single, tmp_path) -> None:
    out = tmp_path / "ism.parquet"
    result, committed = resumed_after_kill(partial(_ism, pool, fasta, out, shard_records=4), out, 40)
    assert result.n_resumed == committed > 0
    _same_file(out, single[False]["parquet"])


def test_resume_refuses_another_job(pool, fasta, tmp_path) -> None:
    from hexamer.vep.job import ResumeError

    out = tmp_path / "ism.tsv"
    stopped(partial(_ism, pool, fasta, out, shard_records=4), 1, 1)
    with pytest.raises(ResumeError, match="indels"):
        _ism(pool, fasta, out, 1, 4, indels=True, resume=True)


def test_a_poisoned_shard_becomes_failed_rows(pool, fasta, single, tmp_path) -> None:
    out = tmp_path / "ism.parquet"
    notes: list[str] = []
    poison = FaultPlan(raise_in_shard=2)  # bases 589-593 of contig a: 4 scored, the R skipped
    result = _ism(pool, fasta, out, 2, 4, fault=poison, on_note=notes.append)
    got = pq.read_table(out).to_pylist()
    want = pq.read_table(single[False]["parquet"]).to_pylist()
    key = [(r["chrom"], r["pos"], r["alt"]) for r in want]
    assert [(r["chrom"], r["pos"], r["alt"]) for r in got] == key  # every variant, in order
    changed = [i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b]
    assert len(changed) == 12  # the 4 scored bases of shard 2, 3 SNVs each
    assert all(got[i]["status"] == "failed" and got[i]["score"] is None for i in changed)
    assert all("InjectedFault" in got[i]["reason"] and "3 times" in got[i]["reason"] for i in changed)
    iupac = [r for r in got if r["pos"] == 590 and r["chrom"] == "a"]
    assert len(iupac) == 4 and all(r["status"] == "skipped" and "IUPAC" in r["reason"] for r in iupac)
    assert result.status_counts["failed"] == 12
    assert any("records 8-12" in n for n in notes)


def test_calibration_fills_phred_on_the_driver(pool, carbon, fasta, tmp_path) -> None:
    cal = calibrate(carbon, FASTA, SETTINGS, n_regions=2, region_bp=5)
    want = _write_all(_single_rows(carbon, fasta, calibration=cal), tmp_path / "single")
    for ext in ("tsv.bgz", "parquet"):
        out = tmp_path / f"ray.{ext}"
        result = _ism(pool, fasta, out, 2, 8, calibration=cal)
        _same_file(out, want[ext])
    assert any(r["phred"] is not None for r in result.rows)
    other = calibrate(carbon, FASTA, replace(SETTINGS, window=300), n_regions=1, region_bp=4)
    with pytest.raises(CalibrationMismatch, match="window=240"):
        _ism(pool, fasta, tmp_path / "refused.tsv", 1, 4, calibration=other)
    assert not run_folder(tmp_path / "refused.tsv").exists()  # refused before any shard


def test_site_mode_matches_one_process(pool, carbon, tmp_path) -> None:
    with Reference(FASTA) as reference:
        regions, unplaced = site_list(SITES_VCF, reference, 2)
        rows = list(iter_mutagenesis(carbon, reference, regions, SETTINGS, on_note=lambda _: None))
    want = _write_all(rows, tmp_path / "single")
    out = tmp_path / "ray.tsv"
    result = ism(
        None,
        FASTA,
        out,
        vcf=SITES_VCF,
        flank=2,
        pool=pool,
        shard_records=8,
        settings=SETTINGS,
        on_note=lambda _: None,
    )
    _same_file(out, want["tsv"])
    assert result.regions == regions and result.unplaced == unplaced


def test_shards_must_be_whole_engine_blocks(pool, fasta, tmp_path) -> None:
    with pytest.raises(ValueError, match="multiple of block_records"):
        _ism(pool, fasta, tmp_path / "ism.tsv", 1, 6)


def test_a_bad_region_fails_before_any_actor_starts(fasta, tmp_path) -> None:
    from hexamer.ism import RegionError

    with pytest.raises(RegionError, match="not in the FASTA"):
        ism("no-such-model", fasta, tmp_path / "ism.tsv", region="zz:1-10")


def _cli(fasta: Path, out: Path, model: Path, *extra: str) -> list:
    return ["ism", "-m", model, "--fasta", fasta, "-r", REGIONS[0], "-r", REGIONS[1], "-o", out,
            "--window", "240", "--batch-size", str(BATCH), *extra]  # fmt: skip


@pytest.mark.slow  # starts a second pool (one actor: the module pool holds 1.5 of the 2 CPUs)
def test_cli_ism_on_ray_writes_the_single_process_files(local_ray, fasta, tiny_folder, tmp_path) -> None:
    summaries = {}
    for name, extra in (("single", []), ("ray", ["--ray", "auto", "--workers", "1"])):
        folder = tmp_path / name
        folder.mkdir()
        figures = ["--plot", folder / "heat.png", "--logo", folder / "logo.png"]
        summaries[name] = run_json(_cli(fasta, folder / "ism.tsv.bgz", tiny_folder, *figures, *extra))
    _same_file(tmp_path / "ray" / "ism.tsv.bgz", tmp_path / "single" / "ism.tsv.bgz")
    for figure in ("heat.png", "logo.png"):
        assert (tmp_path / "ray" / figure).read_bytes() == (tmp_path / "single" / figure).read_bytes()
    a, b = summaries["single"], summaries["ray"]
    assert a["status_counts"] == b["status_counts"] and a["n_written"] == b["n_written"] > 0


def test_cli_shards_of_part_of_a_block_are_refused(fasta, tiny_folder, tmp_path) -> None:
    args = _cli(fasta, tmp_path / "o.tsv", tiny_folder, "--ray", "auto", "--shard-records", "1000")
    assert run(args).exit_code == 2


def test_cli_resume_needs_ray(fasta, tiny_folder, tmp_path) -> None:
    assert run(_cli(fasta, tmp_path / "o.tsv", tiny_folder, "--resume")).exit_code == 2


def test_cli_without_ray_says_how_to_install_it(fasta, tiny_folder, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    result = run(_cli(fasta, tmp_path / "o.tsv", tiny_folder, "--ray", "auto"))
    assert result.exit_code == 2
    assert "pip install 'hexamer[ray]'" in error_message(result)
