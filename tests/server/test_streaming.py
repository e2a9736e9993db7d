"""JSON bodies written lazily and streamed from worker threads: the same text as one ``json.dumps``,
and ``/health`` answers while a large answer is still being written (checked by holding the writer
mid-body, not by timing it)."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from hexamer.engine.request import TokenLogprobs
from hexamer.server import completions as completions_module
from hexamer.server import dna as dna_module
from hexamer.server.completion_logprobs import legacy_logprobs, legacy_logprobs_json, prompt_logprobs_json
from hexamer.server.streaming import JsonPieces, RawJSON, dumps, iter_json


def test_pieces_and_raw_fragments_are_spliced_in_order() -> None:
    obj = {
        "text": "\x00raw0\x00 is only text",  # looks like a marker of an older scheme: stays text
        "raw": RawJSON('{"a":1}'),
        "lazy": [JsonPieces(lambda: iter(["[1", ",2", "]"])), JsonPieces(lambda: iter(["null"]))],
        "nan": math.nan,
        "ü": "ä",
    }
    text = dumps(obj)
    assert json.loads(text) == {
        "text": "\x00raw0\x00 is only text", "raw": {"a": 1}, "lazy": [[1, 2], None], "nan": None, "ü": "ä",
    }  # fmt: skip
    assert "".join(iter_json(obj)) == text


def _logprobs(rows: int, top: int, seed: int = 0) -> TokenLogprobs:
    rng = np.random.default_rng(seed)
    top_lp = -np.sort(rng.exponential(size=(rows, top)).astype(np.float32), axis=1)
    top_lp[0, -1] = -np.inf  # floored to -9999.0
    return TokenLogprobs(
        token_ids=rng.integers(0, 50, size=rows),
        logprob=top_lp[:, 1].copy(),
        rank=np.full(rows, 2),
        top_ids=np.stack([rng.permutation(50)[:top] for _ in range(rows)]),
        top_logprobs=top_lp,
    )


def test_lazy_legacy_logprobs_equal_the_dict() -> None:
    lp = _logprobs(5, 8)
    names = {i: f"t{i % 40}" for i in range(50)}  # ids 40..49 share texts with 0..9: deduplicated by text
    rows = [None, *[(lp, i) for i in range(5)]]
    ids = [3, *lp.token_ids.tolist()]
    for top_n in (0, 3, 8):
        want = legacy_logprobs(ids, rows, 7, top_n=top_n, token_text=names.__getitem__)
        lazy = legacy_logprobs_json(ids, rows, 7, top_n=top_n, token_text=names.__getitem__)
        assert dumps({"x": lazy}) == dumps({"x": want})


def test_lazy_prompt_logprobs_are_json() -> None:
    lp = _logprobs(4, 6)
    text = dumps({"p": prompt_logprobs_json(lp, lambda t: json.dumps(f"t{t}"))})
    rows = json.loads(text)["p"]
    assert rows[0] is None and len(rows) == 5
    first = rows[1][str(int(lp.token_ids[0]))]
    assert first["rank"] == 2 and first["decoded_token"] == f"t{int(lp.token_ids[0])}"
    assert min(v["logprob"] for row in rows[1:] for v in row.values()) == -9999.0


def _held(make):
    """``make`` (a writer of JsonPieces) wrapped so that its pieces wait for ``release``; ``started``
    is set, with the writing thread's name in ``threads``, when the body is being written."""
    started, release, threads = threading.Event(), threading.Event(), []

    def held(*args, **kwargs):
        inner = make(*args, **kwargs)
        if not isinstance(inner, JsonPieces):
            return inner

        def write() -> Iterator[str]:
            threads.append(threading.current_thread().name)
            started.set()
            assert release.wait(60)
            yield from inner.write()

        return JsonPieces(write)

    return held, started, release, threads


@pytest.mark.parametrize(
    ("module", "name", "path", "body"),
    [
        (completions_module, "legacy_logprobs_json", "/v1/completions",
         {"prompt": "<dna>ACGTAC", "max_tokens": 4, "logprobs": 20, "n": 2}),
        (completions_module, "prompt_logprobs_json", "/v1/completions",
         {"prompt": "<dna>" + "ACGTAC" * 20, "max_tokens": 1, "prompt_logprobs": 20}),
        (dna_module, "_array_json", "/v1/dna/score", {"sequences": ["ACGT" * 30] * 3, "per_position": True}),
    ],
)  # fmt: skip
def test_health_answers_while_a_large_answer_is_written(
    url: str, monkeypatch: pytest.MonkeyPatch, module, name: str, path: str, body: dict
) -> None:
    held, started, release, threads = _held(getattr(module, name))
    monkeypatch.setattr(module, name, held)
    out: dict = {}

    def post() -> None:
        out["response"] = httpx.post(f"{url}{path}", json=body, timeout=120)

    client = threading.Thread(target=post)
    client.start()
    try:
        assert started.wait(60), "the answer was never written"
        health = httpx.get(f"{url}/health", timeout=30)  # the body's writer is held mid-way meanwhile
        assert health.status_code == 200
    finally:
        release.set()
        client.join(timeout=120)
    assert out["response"].status_code == 200, out["response"].text[:300]
    out["response"].json()
    assert threads and "uvicorn" not in threads[0] and threads[0] != "MainThread"


def test_pin_mmap_threshold_takes_on_glibc_and_refuses_nonsense() -> None:
    """The server maps large buffers alone so they leave RSS when freed (docs/server.md)."""
    import platform

    from hexamer.server.streaming import MMAP_THRESHOLD_BYTES, pin_mmap_threshold

    assert pin_mmap_threshold(0) is False
    if platform.libc_ver()[0] == "glibc":
        assert pin_mmap_threshold(MMAP_THRESHOLD_BYTES) is True
