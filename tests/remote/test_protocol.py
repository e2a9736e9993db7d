"""Request bodies and parsers of the vLLM and SGLang formats, on canned answers."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from hexamer.remote import MalformedResponse, RemoteError
from hexamer.remote.protocol import SglangFormat, VllmFormat, detect


class Canned:
    """A stand-in for :class:`~hexamer.remote.http.Connection`: records bodies, returns answers."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, Any]] = []

    def url(self, path: str) -> str:
        return f"http://srv{path}"

    async def post(self, path: str, body: Any) -> Any:
        self.sent.append((path, body))
        return self.answers.pop(0)

    async def get(self, path: str) -> Any:
        self.sent.append((path, None))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def run(coro):
    return asyncio.run(coro)


def test_vllm_prompt_logprobs_body_and_parse() -> None:
    answer = {
        "choices": [{"prompt_logprobs": [None, {"7": {"logprob": -0.5, "rank": 1}, "9": {"logprob": -1.5}}]}]
    }
    conn = Canned(answer)
    tops = run(VllmFormat("m").prompt_tops(conn, [1, 9], 2))
    path, body = conn.sent[0]
    assert path == "/v1/completions"
    assert body == {"model": "m", "prompt": [1, 9], "max_tokens": 1, "temperature": 1.0, "prompt_logprobs": 2}
    assert tops[0] is None
    assert tops[1][0].tolist() == [7, 9] and tops[1][1].tolist() == [-0.5, -1.5]


def test_vllm_next_token_needs_token_ids() -> None:
    good = {"choices": [{"logprobs": {"top_logprobs": [{"token_id:5": -0.1, "token_id:6": -2.3}]}}]}
    conn = Canned(good)
    ids, lps = run(VllmFormat("m").next_top(conn, [1, 2], 2))
    assert conn.sent[0][1]["return_tokens_as_token_ids"] is True and conn.sent[0][1]["logprobs"] == 2
    assert ids.tolist() == [5, 6] and lps.tolist() == [-0.1, -2.3]
    strings = {"choices": [{"logprobs": {"top_logprobs": [{"ACGTAC": -0.1}]}}]}
    with pytest.raises(MalformedResponse, match="ignored return_tokens_as_token_ids"):
        run(VllmFormat("m").next_top(Canned(strings), [1], 1))


def test_vllm_generate_reads_token_ids() -> None:
    answer = {
        "choices": [{"logprobs": {"tokens": ["token_id:11", "token_id:12"]}, "finish_reason": "length"}]
    }
    conn = Canned(answer)
    ids, reason = run(
        VllmFormat("m").generate(
            conn, [1], n_tokens=2, temperature=0, top_p=1, seed=4, allowed=[11, 12], stop=[3]
        )
    )
    body = conn.sent[0][1]
    assert (ids, reason) == ([11, 12], "length")
    assert body["allowed_token_ids"] == [11, 12] and body["stop_token_ids"] == [3] and body["ignore_eos"]
    assert body["seed"] == 4 and body["max_tokens"] == 2


def test_sglang_merges_the_prompt_token_and_accepts_a_list_answer() -> None:
    meta = {
        "input_token_logprobs": [[None, 1, None], [-3.0, 9, None], [-0.2, 7, None]],
        "input_top_logprobs": [None, [[-0.1, 7, None], [-0.9, 8, None]], [[-0.2, 7, None]]],
    }
    conn = Canned([{"text": "", "meta_info": meta}])
    tops = run(SglangFormat("m").prompt_tops(conn, [1, 9, 7], 2))
    body = conn.sent[0][1]
    assert conn.sent[0][0] == "/generate"
    assert body["input_ids"] == [1, 9, 7] and body["logprob_start_len"] == 0 and body["top_logprobs_num"] == 2
    assert tops[0] is None
    assert tops[1][0].tolist() == [7, 8, 9] and tops[1][1].tolist() == [-0.1, -0.9, -3.0]  # 9 added
    assert tops[2][0].tolist() == [7]  # already there: not duplicated


@pytest.mark.parametrize(
    "meta,message",
    [
        ({}, "lacks 'input_top_logprobs'"),
        ({"input_token_logprobs": [[None, 1]], "input_top_logprobs": [None]}, "for a prompt of 2 tokens"),
        (
            {"input_token_logprobs": [[None, 1], [-1, 5]], "input_top_logprobs": [None, [[-1, 5]]]},
            r"input_token_logprobs\[1\] is for token 5, the prompt has 9",
        ),
        (
            {"input_token_logprobs": [[None, 1], [-1, 9]], "input_top_logprobs": [None, [["x", 5]]]},
            "expected \\[logprob, token_id, text\\]",
        ),
    ],
)
def test_sglang_malformed(meta: dict, message: str) -> None:
    with pytest.raises(MalformedResponse, match=message):
        run(SglangFormat("m").prompt_tops(Canned({"meta_info": meta}), [1, 9], 2))


def test_sglang_next_token() -> None:
    conn = Canned({"meta_info": {"output_top_logprobs": [[[-0.3, 4, "A"], [-1.4, 5, "C"]]]}})
    ids, lps = run(SglangFormat("m").next_top(conn, [1, 2], 2))
    assert ids.tolist() == [4, 5] and np.allclose(lps, [-0.3, -1.4])
    assert conn.sent[0][1]["sampling_params"]["max_new_tokens"] == 1


@pytest.mark.parametrize(
    "answers,backend",
    [
        ([{"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 512}]}], "vllm"),
        ([{"data": [{"id": "m", "owned_by": "sglang"}]}], "sglang"),
        ([{"data": [{"id": "m", "owned_by": "hexamer"}]}], "hexamer"),
        ([{"data": [{"id": "m", "owned_by": "someone"}]}, {"model_path": "/x"}], "sglang"),
        ([{"data": [{"id": "m"}]}, RemoteError("404", url="u", status=404)], "vllm"),
    ],
)
def test_detect(answers: list, backend: str) -> None:
    info = run(detect(Canned(*answers)))
    assert info.backend == backend and info.models == ("m",)


def test_detect_malformed_and_explicit() -> None:
    with pytest.raises(MalformedResponse, match=r"expected \{'data'"):
        run(detect(Canned({"object": "list"})))
    info = run(detect(Canned({"data": [{"id": "m", "owned_by": "vllm", "max_model_len": 512}]}), "sglang"))
    assert info.backend == "sglang" and info.max_model_len == 512
