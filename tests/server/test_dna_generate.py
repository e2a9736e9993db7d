"""``/v1/dna/generate``: lengths are refused before any work, naming the field."""

from __future__ import annotations

import time

import httpx


def test_an_absurd_length_is_a_400_naming_max_bp_at_once(url: str) -> None:
    for body in ({"max_bp": 10**9}, {"max_tokens": 10**9}):
        start = time.perf_counter()
        r = httpx.post(f"{url}/v1/dna/generate", json={"prompt": "ACGTAC", **body}, timeout=60)
        assert time.perf_counter() - start < 1
        assert r.status_code == 400, r.text
        assert (
            r.json()["error"]["param"] == "max_bp"
            and "exceed the server limit" in r.json()["error"]["message"]
        )
