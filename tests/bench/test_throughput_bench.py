"""The DNA-suite throughput bench: every backend path on the tiny model, and the accounting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hexamer.bench.backends import (
    Backend,
    GenerationRun,
    HexamerBackend,
    LlamaCppAdapter,
    UnavailableBackend,
    llamacpp_backend,
)
from hexamer.bench.report import BenchReport
from hexamer.bench.throughput import make_backends, percentile, run_throughput_bench

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def backends(tiny_folder: Path) -> list[Backend]:
    return make_backends(
        tiny_folder, ["hexamer-token", "hexamer-bp", "transformers", "transformers-static"], max_batch=3
    )


def test_backends_generate_and_time(backends: list[Backend]) -> None:
    prompts = ["ACGTAC" * 4, "TTGACA" * 4]
    for b in backends:
        assert isinstance(b, Backend) and b.available() == (True, "")
        run = b.generate(prompts, 13)
        assert len(run.outputs) == 2 and all(len(o) == 13 and set(o) <= set("ACGT") for o in run.outputs)
        assert run.decode_steps == 2  # 3 tokens: the first comes from the prefill
        assert run.ttft_s is not None and 0 < run.ttft_s < run.seconds
        assert sum(run.itl_s) < run.seconds


def test_hexamer_step_wrapper_is_removed(backends: list[Backend]) -> None:
    b = backends[0]
    assert isinstance(b, HexamerBackend)
    b.generate(["ACGTAC"], 6)
    assert "step" not in vars(b.carbon.engine)  # the class method is back


@dataclass
class FakeBackend:
    """Emits a fixed output per prompt (to check valid-DNA accounting through the bench)."""

    name: str
    output: str
    seconds: float = 0.5
    calls: list[int] = field(default_factory=list)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun:
        self.calls.append(len(prompts))
        return GenerationRun([self.output] * len(prompts), self.seconds, 0.1, [0.01, 0.02, 0.03])


def test_accounting_with_fake_backends() -> None:
    good = FakeBackend("transformers", "ACGTAC" * 2)
    junk = FakeBackend("junk", "ACG</dna>", seconds=0.25)
    gone = UnavailableBackend("llama.cpp", "not installed")
    report = run_throughput_bench([good, junk, gone], batch_sizes=(3, 1), prompt_bp=24, new_bp=12, repeats=2)
    assert isinstance(report, BenchReport)
    assert any("llama.cpp: skipped — not installed" in n for n in report.notes)
    rows = {(r["backend"], r["batch"]): r for r in report.rows}
    assert set(rows) == {("transformers", 3), ("junk", 3), ("transformers", 1), ("junk", 1)}
    # batch 3: warm-up + 2 rounds of one group; batch 1: warm-up + 2 rounds x 7 cases
    assert good.calls == [3, 3, 3] + [1] * 15
    b3 = rows[("junk", 3)]
    assert b3["valid DNA %"] == pytest.approx(25.0)  # 3 of 12 bases
    assert b3["kbp/s"] == pytest.approx(3 * 3 / 0.25 / 1000)
    assert b3["tok/s"] == pytest.approx(3 * 2 / 0.25)
    assert b3["× transformers"] == pytest.approx((9 / 0.25) / (36 / 0.5))
    b1 = rows[("transformers", 1)]
    assert b1["seconds"] == pytest.approx(7 * 0.5) and b1["prompts"] == 7
    assert [c["case"] for c in b1["cases"]][-1] == "CAG-repeat"
    assert b1["ITL p50 (ms)"] == pytest.approx(20.0) and b1["ITL p99 (ms)"] == pytest.approx(30.0)
    assert b1["TTFT p50 (ms)"] == pytest.approx(100.0) and b1["× transformers"] == 1.0
    with pytest.raises(ValueError, match="multiple of 6"):
        run_throughput_bench([good], prompt_bp=25)


def test_real_backends_in_the_suite(backends: list[Backend]) -> None:
    report = run_throughput_bench(backends, batch_sizes=(3,), prompt_bp=24, new_bp=13)
    assert [r["backend"] for r in report.rows] == [
        "hexamer-token",
        "hexamer-bp",
        "transformers",
        "transformers (static cache)",
    ]
    for r in report.rows:
        assert r["valid DNA %"] == 100.0 and r["exact outputs"] == 3
        assert r["kbp/s"] == pytest.approx(3 * 13 / r["seconds"] / 1000)
        assert r["ITL p50 (ms)"] is not None and r["ITL p99 (ms)"] >= r["ITL p50 (ms)"]


def test_percentile_is_linear() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 50) is None
    assert percentile([0, 10], 99) == pytest.approx(9.9)


def test_make_backends_rejects_unknown(tiny_folder: Path) -> None:
    with pytest.raises(ValueError, match="unknown backend"):
        make_backends(tiny_folder, ["vllm"])


@dataclass
class _Timings:
    tokenize_s: float = 0.01
    prefill_s: float = 0.1
    step_s: list[float] = field(default_factory=lambda: [0.02, 0.03])


class _FakeLlama:
    def __init__(self, parity_ok: bool = True) -> None:
        self.parity_ok = parity_ok

    def available(self) -> tuple[bool, str]:
        return True, ""

    def check_parity(self, carbon: object, prompts: Sequence[str], raise_on_failure: bool = True) -> object:
        ok = self.parity_ok

        class Report:
            def check(self) -> None:
                if not ok:
                    raise RuntimeError("logits differ")

        return Report()

    def generate(self, prompts: Sequence[str], new_bp: int, *, batch: int, temperature: float, seed: int):
        assert batch == len(prompts) and temperature == 1.0
        return ["A" * new_bp] * len(prompts), _Timings()


def test_llamacpp_adapter(backends: list[Backend]) -> None:
    carbon = backends[0].carbon  # type: ignore[attr-defined]
    adapter = LlamaCppAdapter(_FakeLlama(), carbon, ["ACGTAC"])
    assert adapter.available() == (True, "")
    run = adapter.generate(["ACGTAC", "ACGTAC"], 12)
    assert run.outputs == ["A" * 12] * 2 and run.ttft_s == pytest.approx(0.11) and run.itl_s == [0.02, 0.03]
    bad = LlamaCppAdapter(_FakeLlama(parity_ok=False), carbon, ["ACGTAC"])
    assert bad.available() == (False, "RuntimeError: logits differ")


def test_llamacpp_backend_reports_why(
    tiny_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    folder = shutil.copytree(
        tiny_folder, tmp_path / "model"
    )  # no GGUF converted by an earlier test beside it
    monkeypatch.setenv("HEXAMER_LLAMA_CPP_DIR", str(folder))  # no converter there
    b = llamacpp_backend(folder, "float32")
    assert b.name == "llama.cpp"
    ok, why = b.available()
    assert not ok and why
