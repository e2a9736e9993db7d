"""One real server (uvicorn on a loopback port) for the whole run, on the tiny test model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.server.testing import serve_in_thread


@pytest.fixture(scope="session")
def url(tiny_folder: Path) -> Iterator[str]:
    with serve_in_thread(tiny_folder, max_num_seqs=16, max_model_len=512, request_timeout_s=60) as base:
        yield base


@pytest.fixture(scope="session")
def ref(tiny_folder: Path) -> Carbon:
    """An independent copy of the model for reference computations."""
    return Carbon.from_pretrained(tiny_folder)


def full_logprobs(carbon: Carbon, ids: list[int]) -> torch.Tensor:
    """(T, V) log-softmax over the whole vocabulary at every position: one plain forward."""
    with torch.inference_mode():
        logits = carbon.model(torch.tensor([ids]), logits_at="all").logits
    assert logits is not None
    return torch.log_softmax(logits[0].double(), dim=-1)


def greedy_ids(carbon: Carbon, ids: list[int], n: int) -> list[int]:
    """Greedy continuation by repeated full forwards (no cache, no engine)."""
    out: list[int] = []
    for _ in range(n):
        out.append(int(full_logprobs(carbon, ids + out)[-1].argmax()))
    return out
