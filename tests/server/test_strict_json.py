"""Every answer of the server is strict JSON (RFC 8259): no ``NaN``/``Infinity`` literals, whatever
the model's outputs. A NaN or infinite logit fails the request that reads it (prompt positions
too); a -inf log-probability of a finite model is sent as -9999.0 (OpenAI's and vLLM's floor); a
NaN that reaches a writer is ``null``. Checked with a parser that refuses the literals."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.engine.request import TokenLogprobs
from hexamer.model.finite import non_finite_output
from hexamer.server.completion_logprobs import legacy_logprobs_json, prompt_logprobs_json
from hexamer.server.streaming import dumps, json_number
from hexamer.server.testing import serve_in_thread

HUGE = 3e38  # finite in float32; x - (+HUGE) for x = -HUGE overflows to -inf in log_softmax
SEQ = "ACGTTGCAGGCTAGCTTACGATCGGATCCATGCAAGCTTGAATTCGCA" * 2


def strict(text: str) -> Any:
    """``json.loads`` refusing NaN, Infinity and -Infinity, as strict clients (jq, JavaScript) do."""

    def refuse(literal: str) -> None:
        raise ValueError(f"not JSON (RFC 8259): {literal}")

    return json.loads(text, parse_constant=refuse)


def test_json_number_and_writers_never_write_nan_or_infinity() -> None:
    assert [json_number(x) for x in (1.5, float("nan"), float("inf"), -float("inf"))] == [
        "1.5", "null", "null", "null",
    ]  # fmt: skip
    top = np.array([[-0.1, np.nan, -np.inf], [-0.2, -0.3, np.inf]], dtype=np.float32)
    lp = TokenLogprobs(
        token_ids=np.array([4, 5], dtype=np.int32),
        logprob=np.array([np.nan, -np.inf], dtype=np.float32),
        rank=np.array([1, 2], dtype=np.int32),
        top_ids=np.array([[4, 6, 7], [4, 5, 6]], dtype=np.int32),
        top_logprobs=top,
    )
    rows = strict(dumps({"p": prompt_logprobs_json(lp, lambda t: json.dumps(f"t{t}"))}))["p"]
    assert rows[1]["4"]["logprob"] is None and rows[1]["6"]["logprob"] is None
    assert rows[1]["7"]["logprob"] == -9999.0 and rows[2]["5"]["logprob"] == -9999.0
    assert rows[2]["6"]["logprob"] is None  # +inf is no log-probability
    legacy = strict(
        dumps({"l": legacy_logprobs_json([3, 4, 5], [None, (lp, 0), (lp, 1)], 0, top_n=3, token_text=str)})
    )["l"]
    assert legacy["token_logprobs"] == [None, None, -9999.0]
    assert legacy["top_logprobs"][1]["6"] is None and legacy["top_logprobs"][2]["6"] is None


def _bodies() -> list[tuple[str, dict[str, Any]]]:
    prompt = "<dna>" + SEQ[:48]
    return [
        (
            "/v1/completions",
            {"prompt": prompt, "max_tokens": 0, "echo": True, "logprobs": 5, "prompt_logprobs": 5},
        ),
        ("/v1/completions", {"prompt": prompt, "max_tokens": 2, "logprobs": 5, "prompt_logprobs": 3}),
        ("/v1/completions", {"prompt": prompt, "max_tokens": 2, "logprobs": 2, "stream": True}),
        ("/v1/dna/generate", {"prompt": "ACGTAC", "max_bp": 12}),
        ("/v1/dna/score", {"sequences": [SEQ, "NNNNNN" + SEQ], "per_position": True}),
        ("/v1/dna/score", {"sequences": [SEQ], "per_position": True, "level": "token"}),
        (
            "/v1/dna/vep",
            {"variants": [{"sequence": SEQ, "pos": 10, "ref": SEQ[9], "alt": "A"}], "window": 60},
        ),
        ("/v1/embeddings", {"input": [SEQ]}),
        ("/v1/dna/embeddings", {"input": [SEQ]}),
    ]


def _check_every_endpoint(base: str) -> dict[str, list[Any]]:
    answers: dict[str, list[Any]] = {}
    for path, body in _bodies():
        r = httpx.post(f"{base}{path}", json=body, timeout=60)
        assert r.status_code in (200, 400, 404, 500), (path, r.status_code, r.text[:300])
        if body.get("stream"):
            events = [x.removeprefix("data: ") for x in r.text.splitlines() if x.startswith("data: ")]
            answers.setdefault(path, []).append([strict(e) for e in events if e != "[DONE]"])
        else:
            answers.setdefault(path, []).append(strict(r.text))
    return answers


@pytest.fixture(scope="module")
def bad_url(overflow_folder: Path) -> Iterator[str]:
    with serve_in_thread(overflow_folder, max_num_seqs=4, max_model_len=256, request_timeout_s=60) as base:
        yield base


def test_every_endpoint_of_an_overflowing_model_is_strict_json(bad_url: str) -> None:
    answers = _check_every_endpoint(bad_url)
    for choice_answer in answers["/v1/completions"][:2]:
        assert choice_answer["error"]["message"] == non_finite_output("logits")


def _patched(folder: Path, change: Callable[[torch.Tensor], None]) -> Carbon:
    """The tiny model whose LM head's output goes through ``change`` (in place) first."""
    carbon = Carbon.from_pretrained(folder)
    model = carbon.model
    compute = model.compute_logits

    def logits(*args: Any, **kwargs: Any) -> torch.Tensor:
        out = compute(*args, **kwargs)
        change(out)
        return out

    model.compute_logits = logits  # type: ignore[method-assign]
    return carbon


def test_a_log_probability_of_minus_infinity_is_sent_as_the_floor(tiny_folder: Path) -> None:
    """Finite logits so far apart that log_softmax gives -inf: a legitimate probability 0."""
    carbon = Carbon.from_pretrained(tiny_folder)
    sure, never = carbon.layout.kmer_id("AAAAAA"), carbon.layout.kmer_id("ACGTTG")

    def extreme(out: torch.Tensor) -> None:
        if out.shape[-1] == carbon.model.config.vocab_size:
            out[..., sure], out[..., never] = HUGE, -HUGE

    with serve_in_thread(_patched(tiny_folder, extreme), max_num_seqs=4, max_model_len=256) as base:
        answers = _check_every_endpoint(base)
    echo = answers["/v1/completions"][0]["choices"][0]
    assert echo["logprobs"]["tokens"][1] == "ACGTTG"  # the prompt's first 6-mer after <dna>
    assert echo["logprobs"]["token_logprobs"][1] == -9999.0
    assert echo["prompt_logprobs"][1][str(never)]["logprob"] == -9999.0
    generated = answers["/v1/completions"][1]["choices"][0]
    assert generated["logprobs"]["token_logprobs"] == [0.0, 0.0]  # AAAAAA, certain


def test_a_nan_at_a_prompt_position_fails_the_request(tiny_folder: Path) -> None:
    """The sampled (last) row is finite, an earlier prompt position is not: the request fails with
    the reason a generation's NaN logits give, instead of a 200 with a broken number."""

    def nan_first_position(out: torch.Tensor) -> None:
        if out.dim() == 2 and out.shape[0] > 1:  # prompt positions (the sampled row is (1, V))
            out[0] = float("nan")

    with serve_in_thread(
        _patched(tiny_folder, nan_first_position), max_num_seqs=4, max_model_len=256
    ) as base:
        for body in (
            {"prompt": "<dna>" + SEQ[:48], "max_tokens": 0, "echo": True, "prompt_logprobs": 2},
            {"prompt": "<dna>" + SEQ[:48], "max_tokens": 2, "prompt_logprobs": 0},
        ):
            r = httpx.post(f"{base}/v1/completions", json=body, timeout=60)
            assert r.status_code == 500 and strict(r.text)["error"]["message"] == non_finite_output("logits")
        plain = httpx.post(
            f"{base}/v1/completions", json={"prompt": "<dna>ACGTAC", "max_tokens": 2}, timeout=60
        )
        assert (
            plain.status_code == 200
        )  # no prompt log-probabilities asked for: the prompt's rows are not read
