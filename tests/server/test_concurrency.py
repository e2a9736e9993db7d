"""64 concurrent streaming clients, some vanishing midway: the others finish exactly as they would
alone, and every KV-cache row and block is free afterwards."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import httpx
import pytest

PROMPTS = ["hello", "<dna>ACGTAC", "the cat", "<mammalian_species><dna>TTGACA"]


def _body(i: int) -> dict:
    return {"prompt": PROMPTS[i % 4], "max_tokens": 8, "temperature": 1.0, "seed": i % 8, "ignore_eos": True}


async def _client(c: httpx.AsyncClient, url: str, i: int, disconnect: bool) -> str | None:
    text = ""
    chunks = 0
    async with c.stream("POST", f"{url}/v1/completions", json={**_body(i), "stream": True}) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunks += 1
            text += json.loads(line[6:])["choices"][0]["text"]
            if disconnect and chunks >= 2:
                return None  # leaving the block closes the connection mid-stream
    return text


def _wait_idle(url: str) -> dict:
    deadline = time.monotonic() + 10
    while True:
        health = httpx.get(f"{url}/health").json()
        if (health["running"], health["waiting"], health["kv_rows_used"]) == (
            0,
            0,
            0,
        ) or time.monotonic() > deadline:
            return health


def _metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    assert match, name
    return float(match.group(1))


def test_64_streams_with_disconnects(url: str) -> None:
    solo = {}
    for i in range(8):
        r = httpx.post(f"{url}/v1/completions", json=_body(i), timeout=60)
        solo[i] = r.json()["choices"][0]["text"]

    async def main() -> list[str | None]:
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=60, limits=limits) as c:
            return await asyncio.gather(*(_client(c, url, i, disconnect=i % 4 == 3) for i in range(64)))

    results = asyncio.run(main())
    for i, text in enumerate(results):
        if i % 4 == 3:
            assert text is None
        else:
            assert text == solo[i % 8], i
    health = _wait_idle(url)
    assert (health["running"], health["waiting"], health["kv_rows_used"]) == (0, 0, 0)
    assert _metric(url, "hexamer_kv_cache_rows_used") == 0
    assert _metric(url, "hexamer_kv_cache_blocks_free") == _metric(url, "hexamer_kv_cache_blocks") > 0
    assert _metric(url, "hexamer_kv_cache_blocks_reserved") == 0


def test_disconnect_cancels_at_once(url: str) -> None:
    before = _metric(url, "hexamer_generated_tokens_total")
    body = {"prompt": "hi", "max_tokens": 400, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
        for n, _ in enumerate(r.iter_lines()):
            if n >= 4:
                break
    health = _wait_idle(url)
    assert health["kv_rows_used"] == 0
    assert _metric(url, "hexamer_kv_cache_blocks_free") == _metric(url, "hexamer_kv_cache_blocks")
    # the request stopped soon after the client left, far short of its 400 tokens
    assert _metric(url, "hexamer_generated_tokens_total") - before < 200


def test_a_repeated_long_prompt_hits_the_prefix_cache(url: str) -> None:
    before = _metric(url, "hexamer_prefix_cache_hit_blocks")
    body = {"prompt": "hello world " * 40, "max_tokens": 2, "temperature": 0}
    first = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    second = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]["text"]
    assert first == second
    _wait_idle(url)
    assert _metric(url, "hexamer_prefix_cache_hit_blocks") > before
    assert 0 < _metric(url, "hexamer_prefix_cache_hit_rate") <= 1
    assert _metric(url, "hexamer_kv_cache_blocks_free") == _metric(url, "hexamer_kv_cache_blocks")


@pytest.mark.slow  # a stress of the server (half a minute on a loaded 2-core machine)
def test_a_pool_smaller_than_the_streams_preempts_and_every_stream_finishes(tiny_folder: Path) -> None:
    """16 streams of 64 tokens in a pool of 40 blocks (one 512-token sequence and a little): rows
    grow into a full pool, the newest are preempted and computed again, each stream gets what it
    gets alone, and every block is free afterwards (disconnected streams included)."""
    from hexamer import Carbon
    from hexamer.engine.kv_manager import kv_bytes_per_token
    from hexamer.server.testing import serve_in_thread

    carbon = Carbon.from_pretrained(tiny_folder)
    pool = 40 * 16 * kv_bytes_per_token(carbon.model)

    def body(i: int) -> dict:
        return {**_body(i), "max_tokens": 64}

    with serve_in_thread(carbon, max_num_seqs=16, max_model_len=512, kv_cache_bytes=pool) as url:
        assert _metric(url, "hexamer_kv_cache_blocks") == 40
        solo = {i: httpx.post(f"{url}/v1/completions", json=body(i), timeout=60).json() for i in range(8)}

        async def client(c: httpx.AsyncClient, i: int) -> str | None:
            text, chunks = "", 0
            async with c.stream("POST", f"{url}/v1/completions", json={**body(i), "stream": True}) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunks += 1
                        text += json.loads(line[6:])["choices"][0]["text"]
                        if i % 8 == 7 and chunks >= 20:
                            return None
            return text

        async def main() -> list[str | None]:
            async with httpx.AsyncClient(timeout=120) as c:
                return await asyncio.gather(*(client(c, i) for i in range(16)))

        results = asyncio.run(main())
        for i, text in enumerate(results):
            if i % 8 != 7:
                assert text == solo[i % 8]["choices"][0]["text"], i
        _wait_idle(url)
        assert _metric(url, "hexamer_preemptions") > 0
        assert _metric(url, "hexamer_kv_cache_blocks_free") == 40
        assert _metric(url, "hexamer_kv_cache_blocks_reserved") == 0
