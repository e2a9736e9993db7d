"""``/v1/dna/predict``: a head served beside the model answers what the library predicts; a server
without one says how to start one with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from hexamer.finetune.apply import Predictor
from hexamer.server.testing import serve_in_thread
from hexamer.testing.heads import build_head_folder


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_head_folder(tmp_path_factory.mktemp("heads") / "bin", kind="binary", classes=("off", "on"))


@pytest.fixture(scope="module")
def head_url(tiny_folder: Path, head: Path) -> Iterator[str]:
    with serve_in_thread(tiny_folder, head=head, max_num_seqs=4, max_model_len=256) as base:
        yield base


def test_predict_equals_the_library(head_url: str, head: Path) -> None:
    seqs = ["ACGTACGTAAGGCTAGCTAGGATCGA", "ggccttaaNNacgtRY", "TTTTAAAACCCCGGGG"]
    r = httpx.post(f"{head_url}/v1/dna/predict", json={"sequences": seqs}, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (
        body["object"] == "dna.predict" and body["columns"] == ["p_off", "p_on"] and body["task"] == "binary"
    )
    got = np.array([[d["values"]["p_off"], d["values"]["p_on"]] for d in body["data"]])
    want = Predictor.load(head).predict(
        ["ACGTACGTAAGGCTAGCTAGGATCGA", "GGCCTTAANNACGTNN", "TTTTAAAACCCCGGGG"]
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)
    both = httpx.post(
        f"{head_url}/v1/dna/predict", json={"sequences": seqs[0], "rc_average": True}, timeout=60
    )
    assert both.json()["rc_average"] is True
    want_rc = Predictor.load(head, rc_average=True).predict([seqs[0]])
    np.testing.assert_allclose([list(both.json()["data"][0]["values"].values())], want_rc, rtol=1e-5)


def test_bad_sequences_are_400(head_url: str) -> None:
    r = httpx.post(f"{head_url}/v1/dna/predict", json={"sequences": ["ACGT", "ACXT"]}, timeout=60)
    assert r.status_code == 400 and "sequences[1]" in r.json()["error"]["message"]
    r = httpx.post(f"{head_url}/v1/dna/predict", json={"sequences": []}, timeout=60)
    assert r.status_code == 400


def test_no_head_is_404_saying_how(url: str) -> None:
    r = httpx.post(f"{url}/v1/dna/predict", json={"sequences": ["ACGT"]}, timeout=60)
    assert r.status_code == 404
    assert "--head" in r.json()["error"]["message"]


def test_a_head_on_the_served_backbone_shares_its_decoder(tiny_folder: Path, tmp_path: Path) -> None:
    from hexamer import Carbon
    from hexamer.finetune.folders import new_classifier, save_classifier
    from hexamer.finetune.head import HeadSettings
    from hexamer.finetune.task import TaskSpec
    from hexamer.model.cpu import use_cpu_linears
    from hexamer.server.app import load_head

    task = TaskSpec("binary", ("label",), ("off", "on"))
    folder = save_classifier(new_classifier(tiny_folder, HeadSettings(task), seed=2), tmp_path / "probe")
    carbon = Carbon.from_pretrained(tiny_folder)
    use_cpu_linears(carbon.model)  # the engine's CPU kernels, where they build
    predictor, _ = load_head(folder, carbon)
    assert predictor.model.backbone.layers is carbon.model.layers  # no second copy of the decoder
    seqs = ["ACGTACGTAAGGCTAGCTAGGATCGA", "TTTTAAAACCCCGGGG"]
    np.testing.assert_allclose(predictor.predict(seqs), Predictor.load(folder).predict(seqs), atol=1e-4)
