"""``hexamer bench gpu``: verify and benchmark one device in minutes, in one command.

Steps, in order, each timed and failing softly (an error is recorded and the next step runs):
environment and ceilings (:mod:`hexamer.bench.gpu_env`), correctness against peers
(:mod:`hexamer.bench.gpu_checks`), then throughput, scoring, batch-1 decode bandwidth and
speculative decoding (:mod:`hexamer.bench.gpu_speed`). Writes ``gpu-report.json`` and
``gpu-report.md`` into the output folder (atomically, after every step, so a killed run keeps
what it measured).

Sizing (:func:`plan_for`): every case is one warm-up plus one timed run; the measuring steps have
a deadline (:data:`DEADLINE_S`: 170 s quick, 460 s full, counted after the ``models`` step that
builds the random-weight folders once into the cache) and a step whose turn comes after it is
skipped. On the CPU (``--device cpu``) the same code runs on the tiny shape and vocabulary, with
no deadline: the dry run CI executes.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from hexamer.bench.gpu_checks import Peers, decode_paths_report, greedy_report, logits_report, scores_report
from hexamer.bench.gpu_env import environment_report, git_commit
from hexamer.bench.gpu_speed import (
    Budget,
    decode_bandwidth_report,
    scoring_report,
    speculative_report,
    throughput_report,
)
from hexamer.bench.report import BenchReport

__all__ = ["DEADLINE_S", "GpuPlan", "GpuStep", "check_device", "plan_for", "run_gpu_bench", "targets"]

#: seconds the whole run may take before the steps left are skipped: (quick, full) on a GPU
DEADLINE_S = {True: 170.0, False: 460.0}
JSON_NAME, MD_NAME = "gpu-report.json", "gpu-report.md"


@dataclass(frozen=True)
class GpuPlan:
    """What each step runs; :func:`plan_for` sizes it for the device and mode."""

    quick: bool
    check_shape: str  # correctness checks (float32 folder: float32 and bf16 loads)
    shapes: tuple[str, ...]  # throughput
    batches: tuple[int, ...]
    peer_batches: tuple[int, ...]  # batches transformers runs at too
    prompt_bp: int
    new_bp: int
    logit_rows: int
    logit_tokens: int
    score_bp: int
    check_tokens: int  # greedy / decode-path tokens per prompt
    sites: int  # scoring: SNV sites (3 ALTs each)
    window: int
    decode_shape: str
    decode_new_bp: int
    spec_extra_layers: int
    spec_new_bp: int
    copy_bytes: int
    matmul_m: int
    deadline_s: float | None  # None: no deadline (the CPU dry run runs every step)
    graphs: bool  # CUDA graphs (compile_decode) in the checks and the decode step


def plan_for(device: torch.device, quick: bool) -> GpuPlan:
    """The sizes of a run. On a GPU (H100-class estimates; the report records each step's seconds):
    quick = the 500M shape only, transformers at batch 1 and 16, CUDA graphs in the decode-path
    check; full = 500M and 3B, transformers at every batch, graphs in the decode step too; every
    GPU shape has the real vocabulary. On the CPU: the tiny test model, short prompts, no graphs
    (a dry run of the code)."""
    if device.type != "cuda":
        return GpuPlan(
            quick=quick, check_shape="tiny", shapes=("tiny",), batches=(1, 4), peer_batches=(4,),
            prompt_bp=60, new_bp=36, logit_rows=2, logit_tokens=24, score_bp=120, check_tokens=8,
            sites=2, window=600, decode_shape="tiny", decode_new_bp=60, spec_extra_layers=1, spec_new_bp=36,
            copy_bytes=16 * 2**20, matmul_m=256, deadline_s=None, graphs=False,
        )  # fmt: skip
    return GpuPlan(
        quick=quick, check_shape="500m", shapes=("500m",) if quick else ("500m", "3b"),
        batches=(1, 16, 64, 256), peer_batches=(1, 16) if quick else (1, 16, 64, 256),
        prompt_bp=1080, new_bp=1080, logit_rows=4, logit_tokens=512, score_bp=2048, check_tokens=64,
        sites=8 if quick else 32, window=8192, decode_shape="500m" if quick else "3b", decode_new_bp=600,
        spec_extra_layers=28, spec_new_bp=600 if quick else 1080,
        copy_bytes=2**30, matmul_m=8192, deadline_s=DEADLINE_S[quick], graphs=True,
    )  # fmt: skip


def check_device(device: str | torch.device) -> torch.device:
    """The device, refused (``ValueError``) before any model is built: CUDA absent or an index past
    the GPUs present, bf16 unsupported, or the 500M shape's weights not fitting the free memory."""
    from hexamer.model.device import check_dtype_on_device
    from hexamer.model.memory import check_fits
    from hexamer.validate import parse_device

    dev = parse_device(device)
    if dev.type == "mps":
        raise ValueError("bench gpu measures a CUDA device (or the CPU dry run: --device cpu --quick)")
    if dev.type == "cuda":
        check_dtype_on_device(torch.bfloat16, dev)
        check_fits(int(0.6e9) * 4, dev, "the 500M shape in float32 (the correctness checks)")
    return dev


@dataclass
class GpuStep:
    """One step of the run: ``status`` is ok, failed (a check did not pass), error (it raised) or skipped."""

    name: str
    status: str
    seconds: float
    report: BenchReport | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "status": self.status,
            "seconds": self.seconds,
            "error": self.error,
        }
        if self.report is not None:
            out.update(title=self.report.title, columns=list(self.report.columns), rows=self.report.rows,
                       notes=self.report.notes)  # fmt: skip
        return out


def _run_step(
    name: str, fn: Callable[[], BenchReport], deadline: float, log: Callable[[str], None]
) -> GpuStep:
    if time.perf_counter() > deadline:
        log(f"{name}: skipped (the run's time is spent)")
        return GpuStep(name, "skipped", 0.0, error="skipped: the run's deadline passed")
    log(f"{name} ...")
    start = time.perf_counter()
    try:
        report = fn()
    except Exception as exc:  # a step fails softly: recorded, and the next one runs
        last = traceback.extract_tb(exc.__traceback__)[-1]
        where = f" ({Path(last.filename).name}:{last.lineno})"
        from hexamer.extras import install_hint

        message = install_hint(exc) or f"{type(exc).__name__}: {exc}{where}"
        log(f"{name}: error: {message}")
        return GpuStep(name, "error", time.perf_counter() - start, error=message)
    failed = any(row.get("pass") is False for row in report.rows)
    step = GpuStep(name, "failed" if failed else "ok", time.perf_counter() - start, report)
    log(f"{name}: {step.status} ({step.seconds:.1f} s)")
    return step


def targets(steps: list[GpuStep], device: torch.device) -> list[dict[str, Any]]:
    """The aims of a GPU run, each with its measured value (``met`` is None on the CPU or unmeasured)."""
    rows = {s.name: (s.report.rows if s.report else []) for s in steps}
    big = [
        r.get("bp/s")
        for r in rows.get("throughput", [])
        if r["shape"] == "3b" and r["batch"] == 256 and r["backend"] == "hexamer"
    ]
    vs_hf = [
        r.get("× transformers")
        for r in rows.get("throughput", [])
        if r["batch"] == 16 and r["backend"] == "hexamer"
    ]
    frac = [
        r["fraction of copy bandwidth"]
        for r in rows.get("decode_bandwidth", [])
        if "context" not in r["decode step"]
    ]
    found = [
        ("Carbon-3B shape, batch 256, aggregate bp/s", next((v for v in big if v), None), 150_000.0),
        ("batch-1 decode, fraction of copy bandwidth", max(frac) if frac else None, 0.70),
        (
            "× transformers.generate at batch 16 (worst shape)",
            min((v for v in vs_hf if v), default=None),
            3.0,
        ),
    ]
    on_gpu = device.type == "cuda"
    return [
        {
            "target": what,
            "value": value,
            "goal": goal,
            "met": (value >= goal) if on_gpu and value is not None else None,
        }
        for what, value, goal in found
    ]


def _steps(plan: GpuPlan, device: torch.device, root: Path) -> list[tuple[str, Callable[[], BenchReport]]]:
    from hexamer.bench.common import bench_model_folder
    from hexamer.bench.spec import PairShape, build_spec_pair
    from hexamer.bench.suite import suite_prompts
    from hexamer.synthetic import SHAPES, build_carbon_folder_once

    state: dict[str, Any] = {}

    def folder(shape: str) -> Path:
        if shape == "tiny":  # the CPU dry run: the small BPE keeps it seconds long
            return build_carbon_folder_once(root / "bench-gpu-tiny", shape="tiny")
        return bench_model_folder(shape, root, "float32" if shape == "500m" else "bfloat16")

    def peers() -> Peers:
        if "peers" not in state:
            state["peers"] = Peers(folder(plan.check_shape), device)
        return state["peers"]

    def environment() -> BenchReport:
        report = environment_report(device, copy_bytes=plan.copy_bytes, matmul_m=plan.matmul_m)
        state["copy"] = report.rows[0]["copy GB/s"] * 1e9
        return report

    prompts = [p.sequence for p in suite_prompts(4, plan.prompt_bp)]
    scored = [p.sequence for p in suite_prompts(3, plan.score_bp, seed=3)]

    def release(report: BenchReport) -> BenchReport:
        if "peers" in state:
            state.pop("peers").clear()
        return report

    spec_pair = PairShape(SHAPES["500m"] if device.type == "cuda" else SHAPES["tiny"], plan.spec_extra_layers)

    def models() -> BenchReport:
        """Every random-weight folder of the plan, built once into the cache (a bare node builds all)."""
        report = BenchReport(
            name="models", title=f"Model folders (under {root})", columns=["model", "seconds"]
        )
        wanted = dict.fromkeys([plan.check_shape, *plan.shapes, plan.decode_shape])
        for shape in wanted:
            t0 = time.perf_counter()
            folder(shape)
            report.rows.append({"model": shape, "seconds": time.perf_counter() - t0})
        t0 = time.perf_counter()
        build_spec_pair(root, spec_pair)
        report.rows.append(
            {"model": f"speculative pair {spec_pair.tag}", "seconds": time.perf_counter() - t0}
        )
        return report

    return [
        ("models", models),
        ("environment", environment),
        ("logits", lambda: logits_report(peers(), rows=plan.logit_rows, tokens=plan.logit_tokens)),
        ("scores", lambda: scores_report(peers(), scored)),
        ("greedy", lambda: greedy_report(peers(), prompts, plan.check_tokens)),
        ("decode_paths", lambda: release(decode_paths_report(peers(), prompts, plan.check_tokens, graphs=plan.graphs))),
        ("throughput", lambda: throughput_report(
            {s: folder(s) for s in plan.shapes}, device, batches=plan.batches, peer_batches=plan.peer_batches,
            prompt_bp=plan.prompt_bp, new_bp=plan.new_bp, budget=Budget((plan.deadline_s or float("inf")) / 2),
        )),
        ("scoring", lambda: scoring_report(folder(plan.check_shape), device, sites=plan.sites, window=plan.window)),
        ("decode_bandwidth", lambda: decode_bandwidth_report(
            folder(plan.decode_shape), device, copy_bandwidth=state.get("copy") or float("nan"),
            new_bp=plan.decode_new_bp, graphs=plan.graphs,
        )),
        ("speculative", lambda: speculative_report(root, device, pair=spec_pair, new_bp=plan.spec_new_bp)),
    ]  # fmt: skip


def run_gpu_bench(
    out: str | Path,
    *,
    device: str | torch.device = "cuda",
    quick: bool = False,
    root: Path | None = None,
    only: tuple[str, ...] | None = None,
    log: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Run every step (or those named in ``only``) and write the two report files into ``out``;
    returns the JSON document. Bad input (``ValueError``) is raised before any model is built."""
    from hexamer.cache import cache_root

    dev = check_device(device)
    plan = plan_for(dev, quick)
    steps = _steps(plan, dev, root or cache_root())
    if only is not None:
        unknown = sorted(set(only) - {name for name, _ in steps})
        if unknown:
            raise ValueError(f"unknown step(s) {', '.join(unknown)}; steps: {', '.join(n for n, _ in steps)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    limit = plan.deadline_s if plan.deadline_s is not None else float("inf")
    deadline = start + limit
    doc: dict[str, Any] = {
        "command": " ".join(["hexamer", *sys.argv[1:]]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "device": str(dev),
        "quick": quick,
        "plan": asdict(plan),
        "steps": [],
    }
    done: list[GpuStep] = []
    for name, fn in steps:
        if only is not None and name not in only:
            continue
        done.append(_run_step(name, fn, deadline, log))
        if name == "models":  # the one-time build is not measurement: the deadline starts after it
            deadline = time.perf_counter() + limit
        doc["steps"] = [s.as_dict() for s in done]
        doc["targets"] = targets(done, dev)
        doc["seconds"] = time.perf_counter() - start
        write_reports(out, doc, done)
    return doc


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_reports(out: Path, doc: dict[str, Any], steps: list[GpuStep]) -> None:
    """``gpu-report.json`` (everything) and ``gpu-report.md`` (the same, as tables)."""
    _atomic_write(out / JSON_NAME, json.dumps(doc, indent=2, default=str))
    lines = [
        f"# hexamer bench gpu: {doc['device']}{' (quick)' if doc['quick'] else ''}",
        "",
        f"`{doc['command']}` on {doc['date']}, commit `{doc['commit']}`, {doc['seconds']:.0f} s in all.",
        "",
        "| step | status | seconds | error |",
        "|---|---|---|---|",
        *(f"| {s.name} | {s.status} | {s.seconds:.1f} | {s.error or ''} |" for s in steps),
        "",
        "| target | measured | goal | met |",
        "|---|---|---|---|",
    ]
    for t in doc["targets"]:
        value = "—" if t["value"] is None else f"{t['value']:,.3g}"
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else "no")
        lines.append(f"| {t['target']} | {value} | {t['goal']:,} | {met} |")
    for s in steps:
        if s.report is None:
            continue
        lines += ["", f"## {s.name}: {s.report.title}", "", s.report.to_markdown()]
        lines += [f"\n{note}" for note in s.report.notes]
    _atomic_write(out / MD_NAME, "\n".join(lines) + "\n")
