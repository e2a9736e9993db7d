"""Every class of bad input is a 4xx naming the problem; auth; limits; never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer.server.testing import serve_in_thread

KEY = "s3cret-key"


@pytest.fixture(scope="module")
def guarded(tiny_folder: Path) -> Iterator[str]:
    with serve_in_thread(
        tiny_folder, api_key=KEY, max_num_seqs=2, max_queue=3, max_body_bytes=4000, max_tokens=50,
        max_logprobs=10, max_n=4, max_model_len=64, max_bp=300, served_model_name="tiny",
    ) as url:  # fmt: skip
        yield url


def _post(
    url: str, path: str, body: object = None, content: bytes | None = None, key: str | None = KEY
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if content is not None:
        return httpx.post(
            f"{url}{path}",
            content=content,
            headers={**headers, "Content-Type": "application/json"},
            timeout=30,
        )
    return httpx.post(f"{url}{path}", json=body, headers=headers, timeout=30)


def test_auth(guarded: str) -> None:
    assert httpx.get(f"{guarded}/health").status_code == 200  # open
    assert httpx.get(f"{guarded}/v1/models").status_code == 401
    r = _post(guarded, "/v1/completions", {"prompt": "hi", "max_tokens": 1}, key="wrong")
    assert r.status_code == 401 and "API key" in r.json()["error"]["message"]
    assert httpx.get(f"{guarded}/metrics", headers={"Authorization": "Basic x"}).status_code == 401
    ok = httpx.get(f"{guarded}/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert ok.status_code == 200 and ok.json()["data"][0]["id"] == "tiny"


BAD = [
    ("/v1/completions", b"{not json", 400, "not valid JSON"),
    ("/v1/completions", b"[1, 2]", 400, "JSON object"),
    ("/v1/completions", {"max_tokens": 2}, 400, "missing required field 'prompt'"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": "two"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "temperature": -1}, 400, "temperature"),
    ("/v1/completions", {"prompt": "hi", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "hi", "bogus_field": 1}, 400, "unknown field 'bogus_field'"),
    ("/v1/completions", {"prompt": 5}, 400, "prompt"),
    ("/v1/completions", {"prompt": ""}, 400, "empty"),
    ("/v1/completions", {"prompt": [[]]}, 400, "no tokens"),
    ("/v1/completions", {"prompt": [1, 99999]}, 400, "out of range"),
    ("/v1/completions", {"prompt": "hi " * 80, "max_tokens": 10}, 400, "maximum context length"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 51}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, "echo"),
    ("/v1/completions", {"prompt": "hi", "logprobs": 11}, 400, "max_logprobs"),
    ("/v1/completions", {"prompt": "hi", "n": 5}, 400, "n:"),
    ("/v1/completions", {"prompt": "hi", "stream": True, "prompt_logprobs": 1}, 400, "stream"),
    ("/v1/completions", {"prompt": "hi", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ("/v1/completions", {"prompt": "hi", "model": "gpt-4"}, 404, "does not exist"),
    ("/v1/completions", {"prompt": "hi", "stop_token_ids": [-1]}, 400, "stop_token_ids"),
    ("/v1/completions", {"prompt": "hi", "stop": ["x"] * 65}, 400, "limit of 64"),
    ("/v1/dna/generate", {"prompt": "ACGT hello", "max_bp": 5}, 400, "not a nucleotide"),
    ("/v1/dna/generate", {"prompt": "ACGT", "max_bp": 301}, 400, "max_bp"),
    ("/v1/dna/generate", {"prompt": "ACGT"}, 400, "exactly one of max_bp"),
    ("/v1/dna/generate", {"prompt": "ACGT", "max_bp": 6, "mask": "NNXN"}, 400, "IUPAC"),
    ("/v1/dna/generate", {"prompt": "ACGTACG" * 40, "max_bp": 200}, 400, "max_model_len"),
    ("/v1/dna/generate", {"prompt": "ACGT", "max_bp": 6, "mode": "text"}, 400, "mode"),
    ("/v1/dna/score", {"sequences": ["ACGT", "protein!"]}, 400, "sequences[1]"),
    ("/v1/dna/score", {"sequences": "ACGT" * 100}, 400, "limit of 300"),
    ("/v1/dna/score", {"sequences": []}, 400, "at least one"),
    ("/v1/dna/vep", {"variants": [{"sequence": "ACGT", "pos": 1, "ref": "A"}]}, 400, "alt"),
    ("/v1/embeddings", {"input": [1, 2, 3]}, 400, "token-id input"),
    ("/v1/embeddings", {"input": "hello"}, 400, "not a nucleotide"),
    ("/v1/embeddings", {"input": "ACGT", "dimensions": 3}, 400, "dimensions"),
]


@pytest.mark.parametrize(("path", "body", "status", "needle"), BAD)
def test_bad_input(guarded: str, path: str, body: object, status: int, needle: str) -> None:
    r = _post(guarded, path, content=body) if isinstance(body, bytes) else _post(guarded, path, body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert needle in error["message"], error
    assert error["code"] == status


def test_body_limit_and_queue(guarded: str) -> None:
    big = {"prompt": "A" * 5000}
    assert _post(guarded, "/v1/completions", big).status_code == 413

    # a body streamed without Content-Length is cut off at the limit too
    def chunks() -> Iterator[bytes]:
        yield b'{"prompt": "'
        yield b"A" * 5000
        yield b'"}'

    r = httpx.post(f"{guarded}/v1/completions", content=chunks(), headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 413
    # more sequences than the queue takes at once: 429, with nothing half-queued
    r = _post(guarded, "/v1/completions", {"prompt": ["a", "b"], "n": 2, "max_tokens": 2})
    assert r.status_code == 429 and "waiting" in r.json()["error"]["message"]
    health = httpx.get(f"{guarded}/health").json()
    assert health["waiting"] == 0 and health["running"] == 0


def test_serve_cli_rejects_bad_settings(tiny_folder: Path) -> None:
    from hexamer.testing.cli import usage_error

    # range-checked by the CLI before the model is read
    exc = usage_error(["serve", "-m", str(tiny_folder), "--max-num-seqs", "0"])
    assert exc.exit_code == 2
    assert exc.format_message().startswith("Invalid value for '--max-num-seqs'")
