"""Bounded work per request: huge prompts are refused before tokenising, off the event loop, and
leave /health responsive and memory near its baseline; streams honour the request timeout and
free their KV rows; non-finite numbers are 400s naming the field; KV caches that cannot fit the
machine are refused at start-up with the estimate."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer.server.testing import serve_in_thread

MB = 2**20


@pytest.fixture(scope="module")
def limited(tiny_folder: Path) -> Iterator[str]:
    with serve_in_thread(tiny_folder, max_num_seqs=16, max_model_len=1100, request_timeout_s=0.5) as url:
        yield url


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class HealthProbe:
    """Polls /health from its own thread and records the slowest answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.worst = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=10) as c:
            while not self.stop.is_set():
                start = time.perf_counter()
                assert c.get(f"{self.url}/health").status_code == 200
                self.worst = max(self.worst, time.perf_counter() - start)
                time.sleep(0.02)

    def __enter__(self) -> HealthProbe:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


HUGE = 4 * MB  # a few MB: what a hostile client sends to a default 32 MiB body limit


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/v1/completions", {"prompt": "x" * HUGE, "max_tokens": 1}, "max_prompt_chars"),
        ("/v1/completions", {"prompt": ["hi", "y " * (HUGE // 2)], "max_tokens": 1}, "prompt[1]"),
        ("/v1/dna/generate", {"prompt": "ACGT" * (HUGE // 4), "max_bp": 6}, "max_prompt_chars"),
        ("/v1/dna/generate", {"prompt": "ACGT", "max_bp": 6, "mask": "N" * HUGE, "n": 64}, "mask: covers"),
        ("/v1/dna/score", {"sequences": "A" * HUGE}, "limit of"),
        ("/v1/embeddings", {"input": "A" * HUGE}, "limit of"),
        (
            "/v1/dna/vep",
            {"variants": [{"sequence": "A" * HUGE, "pos": 1, "ref": "A", "alt": "C"}]},
            "limit of",
        ),
    ],
)
def test_huge_inputs_are_refused_cheaply(limited: str, path: str, body: dict, needle: str) -> None:
    httpx.post(f"{limited}/v1/completions", json={"prompt": "warm", "max_tokens": 1}, timeout=30)
    base = _rss()
    with HealthProbe(limited) as probe:
        for _ in range(3):
            start = time.perf_counter()
            r = httpx.post(f"{limited}{path}", json=body, timeout=30)
            assert r.status_code == 400, r.text[:300]
            assert needle in r.json()["error"]["message"]
            assert time.perf_counter() - start < 5
    assert probe.worst < 1.0, f"/health took {probe.worst:.2f} s"
    assert _rss() - base < 200 * MB, f"RSS grew {(_rss() - base) / MB:.0f} MB"


def test_accepted_long_prompt_leaves_health_responsive(limited: str) -> None:
    """A prompt at the character limit is tokenised (off the event loop), then refused by length."""
    prompt = "hello world " * (16 * 1100 // 12)
    with HealthProbe(limited) as probe:
        r = httpx.post(f"{limited}/v1/completions", json={"prompt": prompt, "max_tokens": 1}, timeout=30)
        assert r.status_code == 400 and "maximum context length" in r.json()["error"]["message"]
        ok = httpx.post(
            f"{limited}/v1/completions",
            json={"prompt": "<dna>" + "ACGTAC" * 700, "max_tokens": 2},
            timeout=30,
        )
        assert ok.status_code == 200, ok.text[:300]
    assert probe.worst < 1.0


def _wait_idle(url: str) -> dict:
    deadline = time.monotonic() + 10
    while True:
        health = httpx.get(f"{url}/health").json()
        if (health["kv_rows_used"] == 0 and health["running"] == 0) or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/dna/generate", {"prompt": "ACGTAC", "max_bp": 6000, "n": 16, "stream": True}),
        (
            "/v1/completions",
            {"prompt": "hi", "max_tokens": 1000, "ignore_eos": True, "n": 16, "stream": True},
        ),
    ],
)
def test_streams_end_at_the_timeout_and_free_their_rows(limited: str, path: str, body: dict) -> None:
    start = time.perf_counter()
    events = []
    with httpx.stream("POST", f"{limited}{path}", json=body, timeout=30) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    elapsed = time.perf_counter() - start
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == 504 and "timed out after 0.5 s" in error["message"]
    assert elapsed < 2.5, f"the stream ran {elapsed:.1f} s against a 0.5 s timeout"
    assert _wait_idle(limited)["kv_rows_used"] == 0


def test_plain_generation_times_out_too(limited: str) -> None:
    start = time.perf_counter()
    r = httpx.post(
        f"{limited}/v1/dna/generate", json={"prompt": "ACGTAC", "max_bp": 6000, "n": 16}, timeout=30
    )
    assert r.status_code == 504 and time.perf_counter() - start < 2.5
    assert _wait_idle(limited)["kv_rows_used"] == 0


@pytest.mark.parametrize(
    ("path", "raw", "field"),
    [
        ("/v1/completions", b'{"prompt": "hi", "temperature": Infinity}', "temperature"),
        ("/v1/completions", b'{"prompt": "hi", "top_p": NaN}', "top_p"),
        ("/v1/completions", b'{"prompt": "hi", "min_p": 1e400}', "min_p"),
        ("/v1/completions", b'{"prompt": "hi", "frequency_penalty": -Infinity}', "frequency_penalty"),
        ("/v1/completions", b'{"prompt": "hi", "logit_bias": {"5": NaN}}', "logit_bias"),
        ("/v1/dna/generate", b'{"prompt": "ACGT", "max_bp": 6, "temperature": Infinity}', "temperature"),
        ("/v1/dna/generate", b'{"prompt": "ACGT", "max_bp": 6, "top_p": NaN}', "top_p"),
    ],
)
def test_non_finite_numbers_name_the_field(limited: str, path: str, raw: bytes, field: str) -> None:
    r = httpx.post(f"{limited}{path}", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == field and "finite" in error["message"], error


def test_kv_cache_larger_than_memory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hexamer.model.memory import NotEnoughMemory
    from hexamer.server import app as server_app
    from hexamer.server import create_app
    from hexamer.synthetic import build_carbon_folder

    folder = build_carbon_folder(tmp_path / "m")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"max_position_embeddings": 2**24}))
    monkeypatch.setattr(server_app, "available_memory_bytes", lambda device: 2**30)
    start = time.perf_counter()
    with pytest.raises(
        NotEnoughMemory, match=r"one sequence of 16,777,216 tokens .* needs .* --max-model-len"
    ):
        create_app(folder)
    assert time.perf_counter() - start < 10
    app = create_app(folder, max_model_len=256, max_num_seqs=4)  # sized by --max-model-len: fine
    assert app.state.hexamer.worker.max_len == 256


def _post_slowly(url: str, path: str, body: dict, pause: float) -> tuple[int, bytes]:
    """POST ``body`` whose last byte arrives ``pause`` seconds after the headers (a slow upload,
    like a request that waited in a client or proxy); returns the status and the response."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    raw = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode()
            + raw[:-1]
        )
        time.sleep(pause)
        sock.sendall(raw[-1:])
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1}),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 1, "stream": True}),
        ("/v1/dna/generate", {"prompt": "ACGTAC", "max_bp": 6}),
        ("/v1/dna/score", {"sequences": ["ACGTACGTAC"]}),
        ("/v1/embeddings", {"input": "ACGTACGTAC"}),
    ],
)
def test_the_timeout_counts_from_arrival(limited: str, path: str, body: dict) -> None:
    """--timeout is the client's clock: a request whose body took longer than the timeout to
    arrive is answered 504 without being queued (it used to get the whole timeout again once
    it reached the engine)."""
    status, _ = _post_slowly(limited, path, body, pause=0.0)
    assert status == 200  # the same request, sent at once, is well within the timeout
    start = time.perf_counter()
    status, data = _post_slowly(limited, path, body, pause=0.8)
    assert status == 504, data[:300]
    assert b"timed out after 0.5 s" in data and time.perf_counter() - start < 2.5
    assert _wait_idle(limited)["kv_rows_used"] == 0


def test_server_engine_reads_the_model_engine_config(tiny_folder: Path) -> None:
    """The server's engine keeps the loaded model's decode options and takes rows, length and KV
    budget from the server settings (a setting left unset keeps the model's config)."""
    from hexamer import Carbon, EngineConfig
    from hexamer.server import create_app

    config = EngineConfig(max_batch_size=2, static_decode=True, dna_only_logits=False, kv_cache_bytes=2**24)
    carbon = Carbon.from_pretrained(tiny_folder, engine=config)
    state = create_app(carbon, max_num_seqs=3, max_model_len=64).state.hexamer
    assert state.engine_config == config.replace(max_batch_size=3, max_model_len=64)
    runner = state.worker.engine.runner
    assert runner.static_decode and not runner.dna_only_logits
    assert (state.worker.rows, state.max_len) == (3, 64)
    assert carbon.engine.config is config  # the offline engine is left as it was
    own_budget = create_app(carbon, max_num_seqs=3, max_model_len=64, kv_cache_bytes=2**25).state.hexamer
    assert own_budget.engine_config.kv_cache_bytes == 2**25


def test_a_kv_budget_sizes_the_block_pool_not_the_rows(tiny_folder: Path) -> None:
    """A budget of three rows of max_model_len tokens: every sequence still gets a row (concurrency
    is bounded by the tokens in flight, not by rows), and the pool holds 3 x 256 tokens of blocks."""
    from hexamer import Carbon
    from hexamer.engine.kv_manager import kv_bytes_per_token
    from hexamer.server.app import create_app

    carbon = Carbon.from_pretrained(tiny_folder)
    per_row = kv_bytes_per_token(carbon.model) * 256
    app = create_app(carbon, max_num_seqs=8, max_model_len=256, kv_cache_bytes=3 * per_row)
    engine = app.state.hexamer.worker.engine
    assert app.state.hexamer.worker.rows == 8
    assert engine.kv_blocks_total == engine.kv_blocks_free == 3 * 256 // engine.kv_block_size
