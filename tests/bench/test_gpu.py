"""``hexamer bench gpu``: the CPU dry run of every step, the plan's sizes, the verdicts, and the
refusals made before any model is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from hexamer.bench import gpu
from hexamer.bench.gpu import GpuStep, check_device, plan_for, run_gpu_bench, targets
from hexamer.bench.report import BenchReport

ROOT = Path(__file__).resolve().parents[2]
STEPS = [
    "models",
    "environment",
    "logits",
    "scores",
    "greedy",
    "decode_paths",
    "throughput",
    "scoring",
    "decode_bandwidth",
    "speculative",
]


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """``--device cpu --quick``: the same code as on a GPU, tiny shapes (tens of seconds)."""
    out = tmp_path_factory.mktemp("gpu-report")
    doc = run_gpu_bench(out, device="cpu", quick=True, root=tmp_path_factory.mktemp("cache"))
    return doc, out


def test_cpu_dry_run_runs_every_step_and_passes(dry_run: tuple[dict[str, Any], Path]) -> None:
    doc, out = dry_run
    assert [s["name"] for s in doc["steps"]] == STEPS
    assert {s["name"]: s["status"] for s in doc["steps"]} == dict.fromkeys(STEPS, "ok")
    assert all(s["seconds"] > 0 for s in doc["steps"])
    written = _strict_json((out / "gpu-report.json").read_text())
    assert written["steps"] == _strict_json(json.dumps(doc["steps"], default=str))
    assert written["device"] == "cpu" and written["quick"] is True
    md = (out / "gpu-report.md").read_text()
    for name in STEPS:
        assert f"## {name}: " in md
    assert all(t["met"] is None for t in doc["targets"])  # no verdict on a CPU


def test_dry_run_checks_against_peers(dry_run: tuple[dict[str, Any], Path]) -> None:
    steps = {s["name"]: s for s in dry_run[0]["steps"]}
    logits = {r["dtype"]: r for r in steps["logits"]["rows"]}
    assert logits["float32"]["max abs diff, hexamer"] <= 1e-4
    assert logits["bfloat16"]["pass"] is True
    assert all(r["pass"] for r in steps["greedy"]["rows"])
    assert {(r["path"], r["decoding"]) for r in steps["decode_paths"]["rows"]} == {
        ("static", "greedy"),
        ("static", "sampled"),
    }
    rates = {(r["batch"], r["backend"]): r for r in steps["throughput"]["rows"]}
    assert set(rates) == {(1, "hexamer"), (4, "hexamer"), (4, "transformers")}
    assert rates[(4, "hexamer")]["× transformers"] > 0
    methods = [r["method"] for r in steps["scoring"]["rows"]]
    assert methods == ["hexamer engine", "naive (hexamer model)", "published recipe (transformers)"]
    assert steps["speculative"]["rows"][1]["same bases"] is True
    assert steps["decode_bandwidth"]["rows"][0]["fraction of copy bandwidth"] > 0


def test_gpu_plan_sizes() -> None:
    quick, full = plan_for(torch.device("cuda"), True), plan_for(torch.device("cuda"), False)
    for plan in (quick, full):
        assert plan.batches == (1, 16, 64, 256)
        assert (plan.prompt_bp, plan.new_bp, plan.window) == (1080, 1080, 8192)
        assert plan.graphs
    assert quick.shapes == ("500m",) and full.shapes == ("500m", "3b")
    assert quick.deadline_s is not None and quick.deadline_s <= 180
    assert full.deadline_s is not None and full.deadline_s <= 480
    assert full.peer_batches == (1, 16, 64, 256) and full.decode_shape == "3b"


def _step(name: str, rows: list[dict[str, Any]]) -> GpuStep:
    return GpuStep(name, "ok", 1.0, BenchReport(name=name, title=name, columns=list(rows[0]), rows=rows))


def test_targets_on_a_gpu() -> None:
    steps = [
        _step(
            "throughput",
            [
                {"shape": "3b", "batch": 256, "backend": "hexamer", "bp/s": 160_000.0},
                {"shape": "500m", "batch": 16, "backend": "hexamer", "× transformers": 4.0},
                {"shape": "3b", "batch": 16, "backend": "hexamer", "× transformers": 2.5},
            ],
        ),
        _step("decode_bandwidth", [{"decode step": "static decode", "fraction of copy bandwidth": 0.75}]),
    ]
    got = {t["target"]: (t["value"], t["met"]) for t in targets(steps, torch.device("cuda"))}
    assert list(got.values()) == [(160_000.0, True), (0.75, True), (2.5, False)]
    assert all(t["met"] is None for t in targets(steps, torch.device("cpu")))


def test_a_failing_step_is_recorded_and_the_next_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(*args: Any, **kwargs: Any) -> BenchReport:
        raise RuntimeError("no bandwidth today")

    monkeypatch.setattr(gpu, "environment_report", broken)
    monkeypatch.setattr(gpu, "scoring_report", lambda *a, **k: _step("scoring", [{"pass": False}]).report)
    doc = run_gpu_bench(tmp_path / "out", device="cpu", only=("environment", "scoring"), root=tmp_path)
    status = {s["name"]: (s["status"], s["error"]) for s in doc["steps"]}
    assert (
        status["environment"][0] == "error" and "RuntimeError: no bandwidth today" in status["environment"][1]
    )
    assert status["scoring"] == ("failed", None)
    assert _strict_json((tmp_path / "out" / "gpu-report.json").read_text())["steps"][1]["status"] == "failed"


def test_unknown_step_refused_before_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown step"):
        run_gpu_bench(tmp_path / "out", device="cpu", only=("warp",))
    assert not (tmp_path / "out").exists()


def _fake_cuda(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], free: int) -> None:
    import hexamer.model.memory as memory
    import hexamer.validate as validate

    monkeypatch.setattr(validate, "parse_device", lambda d: torch.device("cuda", 0))
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Tesla T4")
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: free)


def test_bf16_less_gpu_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, (7, 5), 2**40)
    with pytest.raises(ValueError, match=r"bfloat16 is not supported on cuda:0 \(Tesla T4"):
        check_device("cuda")


def test_too_small_gpu_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cuda(monkeypatch, (9, 0), 2**30)
    with pytest.raises(ValueError, match=r"500M shape in float32 .* needs .* more than the 1\.0 GiB free"):
        check_device("cuda")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HEXAMER_CACHE": str(tmp_path / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "hexamer", "bench", "gpu", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_cli_cuda_without_a_gpu(tmp_path: Path, device: str) -> None:
    done = _cli(tmp_path, "--device", device, "--out", str(tmp_path / "rep"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: device '{device}': no CUDA GPU is available")
    assert not (tmp_path / "rep").exists() and not (tmp_path / "cache").exists()


def test_cli_json_summary(tmp_path: Path) -> None:
    done = _cli(tmp_path, "--device", "cpu", "--quick", "--steps", "environment", "--json", "--out", "rep")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["steps"] == {"environment": "ok"}
    assert (tmp_path / "rep" / "gpu-report.md").is_file()


@pytest.mark.slow  # a second whole dry run (~35 s); the soft-failure rule itself is tested fast above
def test_without_transformers_the_peers_fail_softly(tmp_path: Path) -> None:
    """A GPU node without transformers: the checks against it fail with the install hint, and
    hexamer's own throughput is still measured."""
    from tests.test_extras import BLOCKER, HIDDEN

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER.format(hidden=HIDDEN))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "HEXAMER_CACHE": str(tmp_path / "cache"),
    }
    args = ["--device", "cpu", "--quick", "--steps", "greedy,throughput", "--json", "--out", "rep"]
    done = subprocess.run(
        [sys.executable, "-m", "hexamer", "bench", "gpu", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr  # a step raised
    assert json.loads(done.stdout)["steps"] == {"greedy": "error", "throughput": "ok"}
    steps = {s["name"]: s for s in _strict_json((tmp_path / "rep" / "gpu-report.json").read_text())["steps"]}
    assert "pip install 'transformers>=4.56'" in steps["greedy"]["error"]
    assert [r["backend"] for r in steps["throughput"]["rows"]] == ["hexamer", "hexamer"]
    assert any("transformers peer skipped" in note for note in steps["throughput"]["notes"])
