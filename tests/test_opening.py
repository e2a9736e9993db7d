"""Specs: picklable recipes that open the same model, as a ``Carbon``, in another process."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.opening import LocalSpec, RemoteSpec


def test_local_spec_pickles_small_and_opens_the_same_model(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    spec = LocalSpec(str(tiny_folder), dtype="float32", device="cpu", threads=torch.get_num_threads())
    blob = pickle.dumps(spec)
    assert len(blob) < 1000
    opened = pickle.loads(blob).open()
    assert isinstance(opened, Carbon) and opened.backend.kind == "local"
    assert opened.fingerprint() == carbon.fingerprint()
    assert opened.score("ACGTACGGTACC").mean == carbon.score("ACGTACGGTACC").mean


def test_specs_check_what_they_can() -> None:
    with pytest.raises(ValueError, match="threads"):
        LocalSpec("x", threads=0)
    spec = RemoteSpec("http://127.0.0.1:9", model="m", options={"top_n": 64})
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_remote_spec_opens_a_carbon_built_like_from_server(tiny_folder: Path) -> None:
    from tests.remote.fake_server import FakeSettings, make_app, serve

    local = Carbon.from_pretrained(tiny_folder)
    with serve(make_app(local, FakeSettings(owned_by="vllm"))) as url:
        spec = RemoteSpec(url, options={"tokenizer": str(tiny_folder), "top_n": 4608})
        with pickle.loads(pickle.dumps(spec)).open() as opened:
            assert isinstance(opened, Carbon) and opened.backend.kind == "remote"
            got = opened.score("ACGTACGGTACC").mean
    assert got == pytest.approx(local.score("ACGTACGGTACC").mean, abs=1e-4)
