"""Fixtures: the tiny local model, and fake vLLM / SGLang servers computing from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hexamer import Carbon
from tests.remote.fake_server import FakeSettings, make_app, serve


@pytest.fixture(scope="session")
def local(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


@pytest.fixture(scope="module")
def vllm_url(local: Carbon) -> Iterator[str]:
    with serve(make_app(local, FakeSettings(owned_by="vllm"))) as url:
        yield url


@pytest.fixture(scope="module")
def sglang_url(local: Carbon) -> Iterator[str]:
    with serve(make_app(local, FakeSettings(owned_by="sglang"))) as url:
        yield url
