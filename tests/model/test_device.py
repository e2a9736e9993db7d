"""Device checks made before any weight is read, and the CPU-only kernels kept off other devices."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.model import cpu, native
from hexamer.model.device import check_dtype_on_device


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int]) -> None:
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Tesla V100-SXM2-16GB")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


def test_bf16_refused_on_a_gpu_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, (7, 0))
    with pytest.raises(ValueError, match=r"bfloat16 is not supported on cuda:0 \(Tesla V100.*7\.0.*float16"):
        check_dtype_on_device(torch.bfloat16, "cuda:0")
    check_dtype_on_device(torch.float16, "cuda:0")  # fine there
    check_dtype_on_device(torch.bfloat16, "cpu")


def test_bf16_accepted_on_ampere(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_gpu(monkeypatch, (9, 0))
    check_dtype_on_device(torch.bfloat16, "cuda")


def test_the_load_refuses_before_reading_weights(monkeypatch: pytest.MonkeyPatch, tiny_folder: Path) -> None:
    from hexamer.model import checkpoint as loading

    _fake_gpu(monkeypatch, (7, 5))
    monkeypatch.setattr(loading, "_shards", lambda folder: pytest.fail("weights were read"))
    with pytest.raises(ValueError, match="bfloat16 is not supported on cuda"):
        loading.load_float_model(tiny_folder, dtype="bfloat16", device="cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:7"])
def test_cuda_without_a_gpu_fails_before_the_load(device: str, tiny_folder: Path) -> None:
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        Carbon.from_pretrained(tiny_folder, device=device)


def test_native_kernels_not_built_off_the_cpu(monkeypatch: pytest.MonkeyPatch, tiny_folder: Path) -> None:
    """A model on another device (meta stands in for cuda here) never builds or loads the C kernels."""
    carbon = Carbon.from_pretrained(tiny_folder, native=False, onednn=False)
    model = carbon.model.to("meta")
    monkeypatch.setattr(native, "_build", lambda: pytest.fail("native kernels built"))
    monkeypatch.setattr(cpu, "native_kernels", lambda: pytest.fail("native kernels loaded"))
    assert cpu.use_cpu_linears(model) == "torch"
    assert cpu.use_cpu_linears(model, native=True) == "torch"
