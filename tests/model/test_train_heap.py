"""The training heap settings: taken by glibc, restored on the way out, harmless elsewhere."""

from __future__ import annotations

import ctypes

import pytest
import torch

from hexamer.model import train_heap
from hexamer.model.train_heap import training_heap


def test_training_heap_sets_and_restores_the_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, int]] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append(("mallopt", param, value))
            return 1

        def malloc_trim(self, pad: int) -> int:
            calls.append(("malloc_trim", pad, 0))
            return 1

    monkeypatch.setattr(train_heap, "glibc", lambda: FakeLibc())
    with training_heap() as ok:
        assert ok
        assert calls == [
            ("mallopt", -3, train_heap.MMAP_THRESHOLD_BYTES),
            ("mallopt", -1, train_heap.TRIM_THRESHOLD_BYTES),
        ]
    assert calls[2:] == [("mallopt", -1, 2 * train_heap.MMAP_THRESHOLD_BYTES), ("malloc_trim", 0, 0)]


def test_training_heap_restores_after_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    trimmed: list[int] = []

    class FakeLibc:
        def mallopt(self, param: int, value: int) -> int:
            return 1

        def malloc_trim(self, pad: int) -> int:
            trimmed.append(pad)
            return 1

    monkeypatch.setattr(train_heap, "glibc", lambda: FakeLibc())
    with pytest.raises(RuntimeError), training_heap():
        raise RuntimeError("a training step failed")
    assert trimmed == [0]


def test_without_glibc_nothing_is_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_heap, "glibc", lambda: None)
    with training_heap() as ok:
        assert not ok


def test_the_real_c_library_takes_the_settings_and_tensors_still_work() -> None:
    if train_heap.glibc() is None:
        pytest.skip("not glibc")
    with training_heap():
        for _ in range(3):  # blocks above the old thresholds, freed and allocated again
            x = torch.ones(3072, 1024)
            assert float(x.sum()) == 3072 * 1024
            del x
    assert isinstance(train_heap.glibc(), ctypes.CDLL)
