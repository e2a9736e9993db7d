"""Specs: picklable recipes that open the same model in another process."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.backend import LocalSpec, RemoteSpec


def test_local_spec_pickles_small_and_opens_the_same_model(carbon: Carbon, tiny_folder: Path) -> None:
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
