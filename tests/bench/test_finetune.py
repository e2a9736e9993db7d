"""The fine-tuning benchmark: a well-formed table on a tiny model, failures kept as rows, options checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hexamer.bench import finetune as bench_finetune
from hexamer.bench.common import BenchOptionError
from hexamer.bench.finetune import run_finetune_bench
from hexamer.bench.finetune_cases import bench_rows, peak_rss_bytes

SMALL = {"batch_size": 4, "length": 60, "rows": 8, "steps": 1, "epochs": 2, "isolate": False}


def test_table_figures_follow_from_the_step_times(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = {("hexamer", "full"): 2.0, ("transformers", "full"): 4.0, ("hexamer", "lora"): 1.0,
               ("transformers", "lora"): 1.2, ("probe", "probe"): 0.4}  # fmt: skip
    seen: list[str] = []

    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        seen.append(spec["case"])
        return {"step_seconds": [seconds[spec["case"], spec["method"]]], "peak_rss_bytes": 2**30}

    monkeypatch.setattr(bench_finetune, "_peer_missing", lambda methods: None)
    monkeypatch.setattr(bench_finetune, "run_in_subprocess", fake)
    report = run_finetune_bench(model="unused", rows=64, batch_size=16)
    assert seen[:5] == ["hexamer", "transformers", "hexamer", "transformers", "probe"]
    assert seen[5:10] == seen[4::-1]  # the second round runs the cases in reverse order
    rows = {r["case"]: r for r in report.rows}
    assert rows["hexamer fit, full"]["examples/s"] == pytest.approx(8.0)
    assert rows["hexamer fit, full"]["s/epoch"] == pytest.approx(8.0)  # 4 steps of 16
    assert rows["hexamer fit, full"]["× transformers"] == pytest.approx(2.0)
    assert rows["hexamer fit, LoRA"]["× transformers"] == pytest.approx(1.2)
    assert rows["hexamer fit, probe"]["× full per epoch"] == pytest.approx(20.0)
    assert rows["hexamer fit, LoRA"]["peak RSS (GiB)"] == pytest.approx(1.0)
    notes = " ".join(report.notes)
    assert (
        "2.00× transformers (goal ≥ 1.5×: met)" in notes
        and "1.20× transformers (goal ≥ 1.5×: NOT met)" in notes
    )
    assert "WARNING" not in notes
    assert "Each case and round is a fresh process" in notes


def test_in_process_run_does_not_claim_fresh_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        return {"step_seconds": [1.0], "peak_rss_bytes": None}

    monkeypatch.setattr(bench_finetune, "run_in_process", fake)
    report = run_finetune_bench(model="unused", methods=("full",), peer=False, rows=16, isolate=False)
    notes = " ".join(report.notes)
    assert "fresh process per case" in notes and "Each case and round is a fresh process" not in notes


@pytest.mark.slow
def test_quick_table_on_a_tiny_model(tiny_folder: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    report = run_finetune_bench(model=str(tiny_folder), **SMALL)
    rows = {r["case"]: r for r in report.rows}
    assert list(rows) == [
        "hexamer fit, full",
        "transformers Trainer, full",
        "hexamer fit, LoRA",
        "transformers Trainer + peft, LoRA",
        "hexamer fit, probe",
    ]
    for row in rows.values():
        assert row["status"] == "ok" and row["rounds"] == 3
        assert row["examples/s"] > 0 and row["s/epoch"] > 0
        assert row["peak RSS (GiB)"] is None  # in one process: no memory figure of its own
    assert rows["hexamer fit, full"]["× transformers"] > 0 and rows["hexamer fit, LoRA"]["× transformers"] > 0
    assert rows["hexamer fit, probe"]["× full per epoch"] > 0
    assert rows["transformers Trainer, full"]["× transformers"] is None
    full = rows["hexamer fit, full"]
    assert full["s/epoch"] == pytest.approx(full["seconds_median"] * 2)  # 8 rows = 2 steps of 4
    json.dumps(report.as_dict(), default=str)
    assert report.to_markdown().count("\n") == 6
    assert any("goal" in n for n in report.notes)


def test_a_failing_case_is_a_row_not_a_crash(tiny_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench_finetune.run_in_process

    def flaky(spec: dict[str, Any]) -> dict[str, Any]:
        if spec["case"] == "transformers":
            raise MemoryError("no room")
        return real(spec)

    monkeypatch.setattr(bench_finetune, "run_in_process", flaky)
    pytest.importorskip("transformers")
    report = run_finetune_bench(model=str(tiny_folder), methods=("full",), **{**SMALL, "rounds": 3})
    rows = {r["case"]: r for r in report.rows}
    assert rows["transformers Trainer, full"]["status"] == "failed"
    assert "MemoryError: no room" in rows["transformers Trainer, full"]["reason"]
    assert rows["hexamer fit, full"]["status"] == "ok" and rows["hexamer fit, full"]["× transformers"] is None
    assert any("failed" in n for n in report.notes)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("batch_size", 0),
        ("length", 5),
        ("rows", 0),
        ("steps", 0),
        ("warmup_steps", 0),
        ("epochs", 0),
        ("rounds", 2),
        ("lora_rank", 0),
        ("threads", -1),
        ("steps", 1.5),
        ("methods", ("full", "dora")),
        ("methods", ()),
        ("shape", "huge"),
    ],
)
def test_options_are_range_checked_before_any_model_loads(option: str, value: Any) -> None:
    with pytest.raises(BenchOptionError):
        run_finetune_bench(**{option: value})


def test_rows_are_real_dna_of_the_asked_length() -> None:
    seqs, labels = bench_rows(5, 230)
    assert len(seqs) == 5 and {len(s) for s in seqs} == {230}
    assert all(set(s) <= set("ACGT") for s in seqs) and labels.shape == (5, 3)
    assert peak_rss_bytes() > 10 * 2**20


@pytest.mark.slow
def test_each_case_runs_in_a_fresh_process_with_its_peak_memory(tiny_folder: Path) -> None:
    report = run_finetune_bench(
        model=str(tiny_folder), methods=("lora",), peer=False, **{**SMALL, "isolate": True}
    )
    (row,) = report.rows
    assert row["status"] == "ok" and row["peak RSS (GiB)"] > 0.05


def test_bf16_reaches_both_sides_and_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    specs: list[dict[str, Any]] = []

    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        specs.append(spec)
        return {"step_seconds": [1.0], "peak_rss_bytes": 2**30}

    monkeypatch.setattr(bench_finetune, "_peer_missing", lambda methods: None)
    monkeypatch.setattr(bench_finetune, "run_in_subprocess", fake)
    report = run_finetune_bench(model="unused", methods=["full"], precision="bf16")
    assert {s["case"] for s in specs} == {"hexamer", "transformers"}
    assert all(s["bf16"] is True for s in specs)
    assert "bf16" in report.title and {r["precision"] for r in report.rows} == {"bf16"}
    assert any("bfloat16 autocast" in n for n in report.notes)


def test_both_precisions_pair_each_side_with_its_own_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """--precision both: the headline ratio of each precision pairs hexamer with the peer of the
    same precision; hexamer bf16 over the float32 Trainer is a separate reference line only."""
    seconds = {("hexamer", False): 4.0, ("transformers", False): 6.0,
               ("hexamer", True): 2.0, ("transformers", True): 2.5}  # fmt: skip
    order: list[tuple[str, bool]] = []

    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        order.append((spec["case"], spec["bf16"]))
        return {"step_seconds": [seconds[spec["case"], spec["bf16"]]], "peak_rss_bytes": 3 * 2**30}

    monkeypatch.setattr(bench_finetune, "_peer_missing", lambda methods: None)
    monkeypatch.setattr(bench_finetune, "run_in_subprocess", fake)
    report = run_finetune_bench(model="unused", methods=["full", "lora"], precision="both", rounds=4)
    assert order[:8] == [(c, b) for b in (False, True) for c in ("hexamer", "transformers") * 2]
    assert order[8:16] == order[7::-1]  # alternating rounds across both precisions
    rows = {r["case"]: r for r in report.rows}
    assert rows["hexamer fit, full (fp32)"]["× transformers"] == pytest.approx(1.5)
    assert rows["hexamer fit, full (bf16)"]["× transformers"] == pytest.approx(1.25)
    assert rows["hexamer fit, LoRA (bf16)"]["precision"] == "bf16"
    assert rows["hexamer fit, LoRA (bf16)"]["peak RSS (GiB)"] == pytest.approx(3.0)
    assert "float32 and bf16" in report.title
    notes = " ".join(report.notes)
    assert "hexamer fit, full (bf16): 1.25× transformers (goal ≥ 1.5×: NOT met)" in notes
    assert (
        "For reference only (unlike precisions, not a goal): hexamer fit, full (bf16) over the float32 Trainer, 3.00×"
        in notes
    )


@pytest.mark.parametrize("precision", ["fp16", "", "BF16"])
def test_an_unknown_precision_is_refused(precision: str) -> None:
    with pytest.raises(BenchOptionError, match="--precision"):
        run_finetune_bench(model="unused", precision=precision)


def test_ratio_is_the_median_of_paired_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round's ratio from its own two steps; a round where the peer failed pairs nothing."""
    steps = iter([2.0, 4.0, 1.0, 8.0, 3.0, 5.0])  # rounds 1-2: (hexamer, peer), (peer, hexamer); 3-4
    calls = {"n": 0}

    def fake(spec: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        if spec["case"] == "transformers" and calls["n"] == 6:
            raise MemoryError("killed")
        return {"step_seconds": [next(steps)], "peak_rss_bytes": 2**30}

    monkeypatch.setattr(bench_finetune, "_peer_missing", lambda methods: None)
    monkeypatch.setattr(bench_finetune, "run_in_subprocess", fake)
    report = run_finetune_bench(model="unused", methods=("full",), rounds=4, rows=64, batch_size=16)
    row = {r["case"]: r for r in report.rows}["hexamer fit, full"]
    # round 1: 4 / 2 = 2; round 2: 1 / 8 = 0.125; rounds 3 and 4: the peer failed (not rerun)
    assert row["rounds"] == 4 and not any("hexamer fit, full: failed" in n for n in report.notes)
    assert row["× transformers per round"] == pytest.approx([2.0, 0.125])
    assert row["× transformers"] == pytest.approx((2.0 + 0.125) / 2)
    assert any("the median of 2 round(s) where both sides ran" in n for n in report.notes)
