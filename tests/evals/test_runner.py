"""The runner: cache and resume, bootstrap intervals, the suite's skipped tasks, published summaries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.evals import registry
from hexamer.evals.runner import RecordCache, bootstrap_ci, published_summary, run_suite, run_task
from hexamer.evals.tasks.sequence_recovery import SequenceRecovery
from hexamer.evals.tasks.vep_tasks import Brca2
from tests.evals.lookalike import write_brca2, write_sequence_recovery


class Killed(Exception):
    pass


def test_killed_run_resumes_and_rerun_is_free(tmp_path: Path, carbon: Carbon, human_dna: str) -> None:
    write_brca2(tmp_path / "data", human_dna, n=40, window=120)
    data = tmp_path / "data" / "brca2-vep"
    cache = tmp_path / "cache"
    seen: list[str] = []

    def kill_after_15(record: dict) -> None:
        seen.append(record["id"])
        if len(seen) == 15:
            raise Killed

    with pytest.raises(Killed):
        run_task(
            Brca2(),
            data,
            carbon,
            level="token",
            batch_size=2,
            cache_dir=cache,
            on_record=kill_after_15,
            n_boot=0,
        )
    files = list(cache.glob("brca2-token-*.jsonl"))
    assert len(files) == 1
    with files[0].open("a") as fh:  # a record cut short by the kill
        fh.write('{"id": "0:13:')
    resumed = run_task(Brca2(), data, carbon, level="token", batch_size=2, cache_dir=cache, n_boot=100)
    assert resumed.n_cached == 15
    fresh = run_task(Brca2(), data, carbon, level="token", batch_size=2, cache_dir=None, n_boot=100)
    assert resumed.metrics == pytest.approx(fresh.metrics, nan_ok=True)
    assert resumed.ci == fresh.ci

    class NoScoring(Brca2):
        def score(self, examples, ctx):
            raise AssertionError(f"{len(examples)} examples scored again")

    again = run_task(NoScoring(), data, carbon, level="token", cache_dir=cache, n_boot=100)
    assert again.n_cached == 40 and again.metrics == pytest.approx(fresh.metrics, nan_ok=True)
    # a smaller --limit is a prefix of the sample: served from the same cache
    small = run_task(NoScoring(), data, carbon, level="token", cache_dir=cache, limit=7, n_boot=0)
    assert small.n_examples == 7


def test_cache_is_keyed_by_level_options_and_model(
    tmp_path: Path, carbon: Carbon, tiny_folder: Path, human_dna: str
) -> None:
    write_brca2(tmp_path / "data", human_dna, n=4, window=120)
    data = tmp_path / "data" / "brca2-vep"
    cache = tmp_path / "cache"
    run_task(Brca2(), data, carbon, level="token", cache_dir=cache, n_boot=0)
    assert run_task(Brca2(), data, carbon, level="bp", cache_dir=cache, n_boot=0).n_cached == 0
    opts = {"window": 60}
    assert (
        run_task(Brca2(), data, carbon, level="token", cache_dir=cache, options=opts, n_boot=0).n_cached == 0
    )
    assert (
        run_task(
            Brca2(), data, carbon, level="token", cache_dir=cache, options={"unrelated": 1}, n_boot=0
        ).n_cached
        == 4
    )
    other = Carbon.from_pretrained(tiny_folder)
    with np.errstate(all="ignore"):
        for p in other.model.parameters():
            p.data.mul_(1.01)
    assert run_task(Brca2(), data, other, level="token", cache_dir=cache, n_boot=0).n_cached == 0
    header = json.loads(next(cache.glob("brca2-token-*.jsonl")).read_text().splitlines()[0])["_header"]
    assert header["task"] == "brca2" and header["level"] == "token"


def test_bootstrap_matches_a_direct_percentile_bootstrap() -> None:
    records = [{"id": str(i), "x": float(v)} for i, v in enumerate(np.random.default_rng(1).normal(size=50))]

    def metrics(rs):
        return {"mean": float(np.mean([r["x"] for r in rs])), "n": float(len(rs))}

    ci = bootstrap_ci(metrics, records, n_boot=400, seed=7)
    rng = np.random.default_rng(7)
    x = np.array([r["x"] for r in records])
    means = [x[rng.integers(0, 50, 50)].mean() for _ in range(400)]
    assert ci["mean"] == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    assert "n" not in ci  # counts get no interval
    assert bootstrap_ci(metrics, records, n_boot=0) == {}


def test_published_summary_nests_mapped_keys() -> None:
    task = SequenceRecovery()
    out = published_summary(
        task, {"accuracy": 0.5, "type_accuracy.plant": 0.25, "n": 4.0, "n_errors": 0.0}, {"model": "m"}
    )
    assert out == {
        "model": "m",
        "overall_accuracy": 0.5,
        "type_accuracy": {"plant": 0.25},
        "num_sequences": 4,
    }


def test_suite_skips_missing_data_and_missing_tasks(
    tmp_path: Path, carbon: Carbon, human_dna: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_sequence_recovery(tmp_path, human_dna, n=3, ctx=90)
    monkeypatch.setitem(registry._TASKS, "ghost", "hexamer.evals.tasks.not_written_yet:Ghost")
    results = run_suite(
        carbon,
        tmp_path,
        tasks=["sr", "brca2", "ghost"],
        levels=("token", "bp"),
        n_boot=0,
        out_dir=tmp_path / "out",
    )
    status = {(r.task, r.level): r.status for r in results}
    assert status == {
        ("sr", "token"): "ok",
        ("sr", "bp"): "ok",
        ("brca2", "token"): "skipped",
        ("brca2", "bp"): "skipped",
        ("ghost", "token"): "skipped",
        ("ghost", "bp"): "skipped",
    }
    brca2 = next(r for r in results if r.task == "brca2")
    assert "brca2-vep/brca2_vep.parquet" in brca2.reason
    assert (tmp_path / "out" / "sr-token.json").exists() and (
        tmp_path / "out" / "sr-bp.records.jsonl"
    ).exists()


def test_record_cache_ignores_a_truncated_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    cache = RecordCache(path, {"k": 1})
    cache.add({"id": "a", "v": 1.0})
    cache.add({"id": "b", "v": float("nan")})
    with path.open("a") as fh:
        fh.write('{"id": "c", "v"')
    again = RecordCache(path, {"k": 1})
    assert set(again.records) == {"a", "b"} and again.records["b"]["v"] is None


def test_appending_after_a_cut_line_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    RecordCache(path, {}).add({"id": "a"})
    with path.open("a") as fh:
        fh.write('{"id": "b", "v"')
    RecordCache(path, {}).add({"id": "c"})
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1]) == {"id": "c"}
    RecordCache(path, {}).add({"id": "d"})
    assert len(path.read_text().splitlines()) == 5  # no blank line when the file ends cleanly
    assert set(RecordCache(path, {}).records) == {"a", "c", "d"}
