"""``hexamer bench finetune``: training speed and peak memory of :func:`hexamer.finetune.fit.fit`
against ``transformers.Trainer`` (with ``peft`` for LoRA), and the probe's cost per epoch.

Same weights, same rows (windows of real human DNA, 230 bp as the Malinois MPRA oligos, three
regression targets), same batch size, threads and precision on both sides (``precision``: float32,
bf16 autocast over float32 weights and optimizer, or both, each side against its own kind). Every case of
every round runs in a fresh process (:mod:`hexamer.bench.finetune_cases`), so its peak RSS is its
own and a full fine-tune's optimizer state is gone before the next case loads; rounds alternate
the order of the cases (A B C, C B A, ...) as :func:`hexamer.bench.timing.run_rounds` does. Each
process warms up with untimed steps first; model loading and the final checkpoint are not timed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hexamer.bench.common import BenchOptionError, bench_model_folder
from hexamer.bench.report import BenchReport
from hexamer.bench.timing import MIN_ROUNDS, Timing, put_spread_warning_first
from hexamer.cache import cache_root

#: (row name, case, method, precision) of one timed case
Case = tuple[str, str, str, str]

__all__ = ["METHODS", "PRECISIONS", "TARGETS", "run_finetune_bench"]

#: the methods a run can time (``--methods``)
METHODS: tuple[str, ...] = ("full", "lora", "probe")
#: ``--precision``: float32, bf16 autocast (float32 weights and optimizer), or both in the same rounds
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "both")
_LABEL = {"fp32": "fp32", "bf16": "bf16"}
#: the issue's goals: speed-up over the peer (full, LoRA), probe over full per epoch, LoRA peak RSS
TARGETS = {"full": 1.5, "lora": 1.5, "probe": 10.0, "lora_gib": 8.0}
_GIB = 1024**3


def _check(name: str, value: Any, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BenchOptionError(f"{name} must be an integer in [{lo:g}, {hi:g}], got {value!r}")


def _peer_missing(methods: Sequence[str]) -> str | None:
    """Why the peer cannot run (transformers, or peft for LoRA, not installed), else None."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed: peer skipped (pip install 'hexamer[hf]')"
    if "lora" in methods and importlib.util.find_spec("peft") is None:
        return "peft is not installed: the LoRA peer is skipped (pip install peft)"
    return None


def _case_plan(methods: Sequence[str], peer: bool, precisions: Sequence[str]) -> list[Case]:
    """(row name, case, method, precision) of every case to time; with two precisions every row
    name ends with its precision, and each precision's cases sit together."""
    plan = []
    for precision in precisions:
        tag = f" ({precision})" if len(precisions) > 1 else ""
        for method in methods:
            if method == "probe":
                plan.append((f"hexamer fit, probe{tag}", "probe", "probe", precision))
                continue
            label = "full" if method == "full" else "LoRA"
            plan.append((f"hexamer fit, {label}{tag}", "hexamer", method, precision))
            if peer:
                peer_name = "transformers Trainer" + (" + peft" if method == "lora" else "")
                plan.append((f"{peer_name}, {label}{tag}", "transformers", method, precision))
    return plan


def run_in_process(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in this process (no memory figure of its own: the process holds earlier cases)."""
    from hexamer.bench.finetune_cases import run_case

    result = run_case(spec)
    result["peak_rss_bytes"] = None
    return result


def run_in_subprocess(spec: dict[str, Any]) -> dict[str, Any]:
    """One case in a fresh Python process; its failure is raised with the tail of its stderr."""
    with tempfile.TemporaryDirectory(prefix="hexamer-bench-finetune-") as tmp:
        spec_path, result_path = Path(tmp) / "spec.json", Path(tmp) / "result.json"
        spec_path.write_text(json.dumps(spec))
        proc = subprocess.run(
            [sys.executable, "-m", "hexamer.bench.finetune_cases", str(spec_path), str(result_path)],
            capture_output=True,
            text=True,
            env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
        )
        if proc.returncode != 0 or not result_path.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            why = "killed (out of memory?)" if proc.returncode < 0 else f"exit status {proc.returncode}"
            raise RuntimeError(f"{why}: {' | '.join(tail)}")
        return json.loads(result_path.read_text())


def run_finetune_bench(
    *,
    model: str | None = None,
    shape: str = "500m",
    methods: Sequence[str] = METHODS,
    peer: bool = True,
    batch_size: int = 16,
    length: int = 230,
    rows: int = 64,
    steps: int = 2,
    warmup_steps: int = 1,
    epochs: int = 3,
    rounds: int = MIN_ROUNDS,
    lora_rank: int = 8,
    threads: int = 0,
    precision: str = "fp32",
    quick: bool = False,
    isolate: bool = True,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Examples/s of ``fit`` (full, LoRA) and of the transformers peer, the probe's seconds per
    epoch against full fine-tuning's, and each case's peak RSS (``isolate``: one process per case
    and round; without it the cases run here and no memory is reported). ``precision``: ``fp32``,
    ``bf16`` (both sides under bfloat16 autocast: hexamer's ``bf16`` option, the Trainer's
    ``bf16=True``) or ``both`` (each precision's cases in the same alternating rounds; every
    ratio pairs hexamer with the peer of its own precision)."""
    from hexamer.finetune.options import LoraOptions
    from hexamer.synthetic import SHAPES

    if model is None and shape not in SHAPES:
        raise BenchOptionError(f"--shape must be one of {sorted(SHAPES)}")
    if not methods or not set(methods) <= set(METHODS):
        raise BenchOptionError(f"--methods must be a comma-separated subset of {list(METHODS)}")
    if precision not in PRECISIONS:
        raise BenchOptionError(f"--precision must be one of {list(PRECISIONS)}, got {precision!r}")
    for name, value, lo, hi in (
        ("--batch-size", batch_size, 1, 4096),
        ("--length", length, 6, 1_000_000),
        ("--rows", rows, 1, 10_000_000),
        ("--steps", steps, 1, 100_000),
        ("--warmup-steps", warmup_steps, 1, 1000),
        ("--epochs", epochs, 1, 1000),
        ("--rounds", rounds, MIN_ROUNDS, 1000),
        ("--lora-rank", lora_rank, 1, 4096),
        ("--threads", threads, 0, 4096),
    ):
        _check(name, value, lo, hi)
    if quick:
        shape = "tiny" if model is None else shape
        rows, steps, length = min(rows, 32), min(steps, 2), min(length, 230)
    methods = [m for m in METHODS if m in methods]
    why_no_peer = _peer_missing(methods) if peer else None
    folder = model or str(bench_model_folder(shape, cache_root()))
    lora_targets = list(LoraOptions().targets)
    spec_base = {
        "folder": str(folder), "rows": max(rows, (warmup_steps + steps + 1) * batch_size),
        "length": length, "batch_size": batch_size, "lr": 5e-5, "lora_rank": lora_rank,
        "lora_targets": lora_targets, "warmup_steps": warmup_steps, "steps": steps,
        "epochs": epochs, "threads": threads, "seed": 0, "precision": precision, "isolate": isolate,
    }  # fmt: skip
    probe_rows = rows
    precisions = ["fp32", "bf16"] if precision == "both" else [precision]
    plan = _case_plan(methods, peer and why_no_peer is None, precisions)
    run = run_in_subprocess if isolate else run_in_process
    timings = {name: Timing() for name, *_ in plan}
    per_round: list[dict[str, float]] = []  # each round's step of every case that ran in it
    peaks: dict[str, list[int]] = {name: [] for name, *_ in plan}
    failed: dict[str, str] = {}
    for r in range(rounds):
        per_round.append({})
        for name, case, method, prec in plan if r % 2 == 0 else list(reversed(plan)):
            if name in failed:
                continue
            spec = {**spec_base, "case": case, "method": method, "bf16": prec == "bf16"}
            if case == "probe":
                spec.update(rows=probe_rows, steps=1)
            try:
                result = run(spec)
            except Exception as exc:  # one case failing (a peer, memory) must not lose the others
                failed[name] = f"{type(exc).__name__}: {exc}"
                log(f"{name}: failed — {failed[name]}")
                continue
            step = sorted(result["step_seconds"])[len(result["step_seconds"]) // 2]
            timings[name].seconds.append(step)
            per_round[-1][name] = step
            if result.get("peak_rss_bytes"):
                peaks[name].append(int(result["peak_rss_bytes"]))
            log(f"round {r + 1}/{rounds}: {name} {step:.3g} s/{'epoch' if case == 'probe' else 'step'}")
    return _report(
        plan, timings, peaks, failed, spec_base, probe_rows, folder=str(folder), why_no_peer=why_no_peer,
        per_round=per_round,
    )  # fmt: skip


def _report(
    plan: list[Case],
    timings: dict[str, Timing],
    peaks: dict[str, list[int]],
    failed: dict[str, str],
    spec: dict[str, Any],
    probe_rows: int,
    *,
    folder: str,
    why_no_peer: str | None,
    per_round: list[dict[str, float]],
) -> BenchReport:
    """The table. "× transformers" is the median over the rounds of each round's own ratio (the
    two sides of a round run back to back, under the same load), from the rounds where both ran:
    on a shared machine the load changes between rounds, and a ratio of medians taken from
    different rounds (or with a peer that failed in some) would compare unlike conditions."""
    import torch

    batch = spec["batch_size"]
    steps_per_epoch = math.ceil(probe_rows / batch)
    threads = spec["threads"] or torch.get_num_threads()
    precision = {"fp32": "float32", "bf16": "bf16 autocast", "both": "float32 and bf16 autocast"}[
        spec["precision"]
    ]
    report = BenchReport(
        name="finetune",
        title=(
            f"fine-tuning speed ({Path(folder).name}, {precision}, batch {batch} × {spec['length']} bp, "
            f"{threads} threads; epoch = {probe_rows} rows)"
        ),
        columns=(
            "case", "s/step (min / median / max)", "examples/s", "s/epoch", "× transformers",
            "× full per epoch", "peak RSS (GiB)",
        ),
        formats={"examples/s": "{:,.2f}", "s/epoch": "{:,.3g}", "× transformers": "{:.2f}×",
                 "× full per epoch": "{:.1f}×", "peak RSS (GiB)": "{:.2f}"},
    )  # fmt: skip
    by_method: dict[tuple[str, str, str], float] = {}
    for name, case, method, prec in plan:
        t = timings[name]
        if t.seconds:
            by_method[(case, method, prec)] = t.median if case == "probe" else t.median * steps_per_epoch
    for name, case, method, prec in plan:
        t = timings[name]
        row: dict[str, Any] = {
            "case": name, "method": method, "backend": case, "precision": prec, "status": "ok",
        }  # fmt: skip
        if not t.seconds:
            row.update(status="failed", reason=failed.get(name, "no timed round"))
            report.rows.append(row)
            continue
        epoch = by_method[(case, method, prec)]
        full_epoch = by_method.get(("hexamer", "full", prec))
        paired = _paired(plan, per_round, name, method, prec) if case == "hexamer" else []
        row.update(
            {
                "s/step (min / median / max)": None if case == "probe" else t.summary(),
                "examples/s": probe_rows / epoch,
                "s/epoch": epoch,
                "× transformers": statistics.median(paired) if paired else None,
                "× transformers per round": paired or None,
                "× full per epoch": full_epoch / epoch if case == "probe" and full_epoch else None,
                "peak RSS (GiB)": max(peaks[name]) / _GIB if peaks[name] else None,
                "steps_timed_per_round": 1 if case == "probe" else spec["steps"],
                **t.as_dict(),
            }
        )
        report.rows.append(row)
    _notes(report, plan, timings, failed, spec, probe_rows, why_no_peer)
    _cross_precision_note(report, plan, per_round)
    return report


def _paired(
    plan: list[Case],
    per_round: list[dict[str, float]],
    name: str,
    method: str,
    prec: str,
    peer_prec: str | None = None,
) -> list[float]:
    """Each round's peer step over hexamer's ``name`` step, from the rounds where both ran; the
    peer of ``method`` in ``peer_prec`` (default: hexamer's own precision)."""
    want = peer_prec or prec
    peer = next((n for n, c, m, p in plan if c == "transformers" and m == method and p == want), None)
    return [r[peer] / r[name] for r in per_round if peer in r and name in r]


def _notes(
    report: BenchReport,
    plan: list[Case],
    timings: dict[str, Timing],
    failed: dict[str, str],
    spec: dict[str, Any],
    probe_rows: int,
    why_no_peer: str | None,
) -> None:
    rows = {r["case"]: r for r in report.rows}
    targets = ", ".join(spec["lora_targets"])
    where = (
        "Each case and round is a fresh process"
        if spec.get("isolate", True)
        else "All cases run in this one process (no fresh process per case, so no peak RSS of their own)"
    )
    report.notes.append(
        f"{where}: {spec['warmup_steps']} untimed warm-up step(s), then "
        f"{spec['steps']} timed optimizer steps (median per round; min / median / max over the rounds, "
        "which alternate the order of the cases). hexamer: fit() itself, steps stamped by on_progress. "
        "Peer: transformers.Trainer.train() on AutoModelForSequenceClassification (its default "
        "optimizer, max_grad_norm 1.0, the same token ids), steps stamped by a TrainerCallback. "
        f"LoRA: rank {spec['lora_rank']}, alpha {2 * spec['lora_rank']}, on {targets} (hexamer's "
        "default; peft.get_peft_model with task_type SEQ_CLS on the peer side), head trained."
    )
    if spec["precision"] != "fp32":
        report.notes.append(
            "Precision: bf16 rows run both sides under bfloat16 autocast with float32 weights and "
            "optimizer (hexamer's bf16 option; the Trainer's bf16=True); each × transformers pairs "
            "hexamer with the peer of its own precision."
        )
    if any(case == "probe" for _, case, *_ in plan):
        report.notes.append(
            f"Probe: features of the {probe_rows} rows computed once, then the head trained for "
            f"{spec['epochs']} epochs; its s/epoch is that whole time / {spec['epochs']}. Full fine-tuning's "
            f"s/epoch is its median step × {math.ceil(probe_rows / spec['batch_size'])} steps."
        )
    for name, case, method, _ in plan:
        row = rows.get(name, {})
        speed = row.get("× transformers")
        if case == "hexamer" and speed is not None:
            goal = TARGETS[method]
            met = "met" if speed >= goal else "NOT met"
            each = row["× transformers per round"]
            report.notes.append(
                f"{name}: {speed:.2f}× transformers (goal ≥ {goal:g}×: {met}), the median of "
                f"{len(each)} round(s) where both sides ran: " + ", ".join(f"{x:.2f}×" for x in each)
            )
        if case == "probe" and row.get("× full per epoch") is not None:
            probe = row["× full per epoch"]
            met = "met" if probe >= TARGETS["probe"] else "NOT met"
            report.notes.append(
                f"{name}: {probe:.1f}× faster per epoch than full (goal ≥ {TARGETS['probe']:g}×: {met})"
            )
        if case == "hexamer" and method == "lora" and row.get("peak RSS (GiB)") is not None:
            gib = row["peak RSS (GiB)"]
            met = "met" if gib <= TARGETS["lora_gib"] else "NOT met"
            report.notes.append(f"{name}: peak RSS {gib:.2f} GiB (goal ≤ {TARGETS['lora_gib']:g} GiB: {met})")
    for name, why in failed.items():
        report.notes.append(f"{name}: failed — {why}")
    if why_no_peer is not None:
        report.notes.append(why_no_peer)
    put_spread_warning_first(report.notes, {k: t for k, t in timings.items() if len(t.seconds) > 1})


def _cross_precision_note(report: BenchReport, plan: list[Case], per_round: list[dict[str, float]]) -> None:
    """With both precisions: hexamer in bf16 over the Trainer in float32, per method, as a separate
    line (not a goal: the two sides then compute in different precisions)."""
    for name, case, method, prec in plan:
        if case != "hexamer" or prec != "bf16":
            continue
        each = _paired(plan, per_round, name, method, prec, peer_prec="fp32")
        if each:
            report.notes.append(
                f"For reference only (unlike precisions, not a goal): {name} over the float32 "
                f"Trainer, {statistics.median(each):.2f}× (per round: "
                + ", ".join(f"{x:.2f}×" for x in each)
                + ")"
            )
