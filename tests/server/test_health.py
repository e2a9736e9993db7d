"""A model whose output is NaN or infinite: ``/health`` says so (start-up self-check) and every
endpoint answers a clear error or a ``failed`` row, never ``ok`` with null numbers or empty text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer import Carbon
from hexamer.engine import Engine
from hexamer.model.finite import non_finite_output
from hexamer.server.health import SELF_CHECK_DNA, self_check
from hexamer.server.testing import serve_in_thread

NAN_LOGITS = non_finite_output("logits")


@pytest.fixture(scope="module")
def bad_url(overflow_folder: Path) -> Iterator[str]:
    with serve_in_thread(overflow_folder, max_num_seqs=4, max_model_len=256, request_timeout_s=60) as base:
        yield base


def test_self_check_passes_a_healthy_model_and_names_a_broken_one(
    tiny_folder: Path, overflow_folder: Path
) -> None:
    good, bad = Carbon.from_pretrained(tiny_folder), Carbon.from_pretrained(overflow_folder)
    assert len(SELF_CHECK_DNA) % 6 == 0
    assert self_check(Engine(good.model, good.layout), good.tokenizer) is None
    assert (
        self_check(Engine(bad.model, bad.layout), bad.tokenizer)
        == f"start-up self-check of the model: {NAN_LOGITS}"
    )
    engine = Engine(good.model, good.layout)
    engine.attach_draft(bad.model)
    assert "self-check of the draft model" in (self_check(engine, good.tokenizer) or "")


def test_health_is_not_ok(bad_url: str, url: str) -> None:
    r = httpx.get(f"{bad_url}/health")
    assert r.status_code == 503
    assert r.json()["status"] == "model_error" and r.json()["reason"].endswith(NAN_LOGITS)
    healthy = httpx.get(f"{url}/health")
    assert healthy.status_code == 200 and healthy.json()["status"] == "ok" and "reason" not in healthy.json()


def test_score_items_are_failed_with_no_numbers(bad_url: str) -> None:
    r = httpx.post(
        f"{bad_url}/v1/dna/score", json={"sequences": ["ACGTACGTAGCT", "NNNNNN"], "per_position": True}
    )
    assert r.status_code == 200
    failed, unscored = r.json()["data"]
    assert failed["status"] == "failed" and failed["reason"] == non_finite_output("log-probability")
    assert failed["mean"] is None and failed["sum"] is None  # never "sum": 0.0
    assert unscored["status"] == "unscored" and unscored["sum"] is None


def test_vep_rows_are_failed(bad_url: str) -> None:
    seq = "ACGTTGCAGGCTAGCTTACGATCGGATCCATGCAAGCTTGAATTCGCA" * 2
    r = httpx.post(
        f"{bad_url}/v1/dna/vep",
        json={
            "variants": [{"sequence": seq, "pos": 10, "ref": seq[9], "alt": "A" if seq[9] != "A" else "C"}],
            "window": 60,
        },
    )
    assert r.status_code == 200
    (row,) = r.json()["data"]
    assert row["status"] == "failed" and row["score"] is None and row["reason"] == non_finite_output("score")


def test_embeddings_answer_500_naming_the_cause(bad_url: str) -> None:
    r = httpx.post(f"{bad_url}/v1/embeddings", json={"input": ["ACGTACGTAGCT"]})
    assert r.status_code == 500
    assert r.json()["error"]["message"] == f"input[0]: {non_finite_output('embedding')}"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "<dna>ACGTAC", "max_tokens": 4}),
        ("/v1/dna/generate", {"prompt": "ACGTAC", "max_bp": 12}),
    ],
)
def test_generation_answers_500_not_empty_text(bad_url: str, path: str, body: dict) -> None:
    r = httpx.post(f"{bad_url}{path}", json=body)
    assert r.status_code == 500 and r.json()["error"]["message"] == NAN_LOGITS
    streamed = httpx.post(f"{bad_url}{path}", json={**body, "stream": True})
    events = [line.removeprefix("data: ") for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == 500 and error["message"] == NAN_LOGITS
