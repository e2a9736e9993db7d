"""Range checks shared by the library and the CLI: each refuses before anything is allocated."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.engine import SamplingParams
from hexamer.validate import (
    SEED_MAX,
    SEED_MIN,
    check_dtype,
    check_seed,
    check_threads,
    max_threads,
    parse_device,
)


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def _address_space() -> int:
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    return kb * 1024


def test_seed_range_is_torchs() -> None:
    for seed in (SEED_MIN, SEED_MAX, 0, -1):
        check_seed(seed)
        torch.Generator().manual_seed(seed)  # the peer accepts every seed the check accepts
    for seed in (SEED_MIN - 1, SEED_MAX + 1, 2**70):
        with pytest.raises(ValueError, match=r"seed must lie in \[-2\*\*63, 2\*\*64 - 1\]"):
            check_seed(seed)
        with pytest.raises(ValueError):
            torch.Generator().manual_seed(seed)  # ... and refuses every seed it refuses
    with pytest.raises(ValueError, match="seed must be an integer"):
        check_seed(True)


def test_library_refuses_bad_seed_and_huge_max_bp_before_allocating(carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="seed must lie in"):
        SamplingParams(max_bp=6, seed=2**70)
    with pytest.raises(ValueError, match="seed must lie in"):
        carbon.generate("ACGTAC", max_bp=6, seed=2**70)
    # max_bp=10**12 once asked numpy for 3.6 TiB; with at most 2 GiB more address space it must
    # fail with the context message, not a MemoryError.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (min(_address_space() + (2 << 30), hard), hard))
        with pytest.raises(
            ValueError,
            match=r"max_bp=1,000,000,000,000 needs .* exceeds the model's context of [\d,]+ tokens \(at most",
        ):
            carbon.generate("ACGTAC", max_bp=10**12)
        with pytest.raises(ValueError, match="exceeds the model's context"):
            carbon.check_prompt("ACGTACG", max_bp=10**12)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_context_limit_is_exact(carbon: Carbon) -> None:
    """The largest max_bp the message promises is accepted, one more base is not."""
    with pytest.raises(ValueError, match=r"at most (\d+) new bp") as info:
        carbon.check_prompt("ACGTACGT", max_bp=6 * carbon.context_length)  # fits without the prompt
    most = int(str(info.value).rsplit("at most ", 1)[1].split()[0])
    carbon.check_prompt("ACGTACGT", max_bp=most)
    with pytest.raises(ValueError, match="exceeds the model's context"):
        carbon.check_prompt("ACGTACGT", max_bp=most + 1)


def test_devices() -> None:
    assert parse_device("cpu") == torch.device("cpu")
    assert parse_device(None).type in ("cpu", "cuda")
    with pytest.raises(ValueError, match=r"unknown device 'tpu:7': use cpu, cuda"):
        parse_device("tpu:7")
    with pytest.raises(ValueError, match="hexamer runs on cpu, cuda, mps, not meta"):
        parse_device("meta")
    with pytest.raises(ValueError, match=r"'cuda:99'"):
        parse_device("cuda:99")
    with pytest.raises(ValueError, match="unknown device"):
        parse_device("gpu")


def test_threads_and_dtype() -> None:
    check_threads(1)
    check_threads(max_threads())
    for bad in (0, max_threads() + 1, 100_000):
        with pytest.raises(ValueError, match=r"threads must lie in \[1, \d+\]"):
            check_threads(bad)
    check_dtype("bf16")
    check_dtype("int8-bf16")  # int8 weights (hexamer.model.quant)
    with pytest.raises(ValueError, match="dtype must be one of"):
        check_dtype("int2")
