"""Connection limits and shutdown, from raw loopback sockets: slow headers, lying Content-Length,
garbage and idle connections are closed on time; connections beyond the cap get 503; SIGTERM
drains (new work 503, /health 503, in-flight requests finish within the grace, the rest end with
an error event)."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer.server.app import create_app
from hexamer.server.testing import running_server, serve_in_thread


@pytest.fixture(scope="module")
def strict(tiny_folder: Path) -> Iterator[str]:
    with serve_in_thread(
        tiny_folder, max_num_seqs=4, max_model_len=256, header_timeout_s=0.5, body_timeout_s=0.5,
        keep_alive_s=0.5, max_connections=4,
    ) as url:  # fmt: skip
        yield url


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def _read_until_closed(sock: socket.socket, limit: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed."""
    start = time.perf_counter()
    data = b""
    sock.settimeout(limit)
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(
                f"the server kept the connection open {limit} s; got {data[:200]!r}"
            ) from None
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data, time.perf_counter() - start


def _long_stream(url: str) -> tuple[threading.Thread, list[str]]:
    """A started thread streaming four long completions; ``events`` gets the SSE data lines."""
    events: list[str] = []

    def stream() -> None:
        body = {"prompt": "hi", "max_tokens": 2000, "n": 4, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
            events.extend(line[6:] for line in r.iter_lines() if line.startswith("data: "))

    reader = threading.Thread(target=stream)
    reader.start()
    return reader, events


def test_slow_headers_are_cut_off(strict: str) -> None:
    sock = _connect(strict)
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    start = time.perf_counter()
    closed = threading.Event()

    def drip() -> None:  # one header line every 0.1 s, never the blank line that ends them
        for i in range(50):
            if closed.is_set():
                return
            try:
                sock.sendall(f"X-Drip-{i}: y\r\n".encode())
            except OSError:
                return
            time.sleep(0.1)

    threading.Thread(target=drip, daemon=True).start()
    data, _ = _read_until_closed(sock)
    closed.set()
    assert time.perf_counter() - start < 2.0
    assert data.startswith(b"HTTP/1.1 408")


def test_idle_connection_is_closed(strict: str) -> None:
    sock = _connect(strict)
    data, took = _read_until_closed(sock)
    assert data == b"" and took < 2.0


def test_lying_content_length_gets_408_and_close(strict: str) -> None:
    sock = _connect(strict)
    sock.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 1000\r\n\r\n{"prompt": "hi"'
    )
    data, took = _read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 408") and b"connection: close" in data.lower()
    assert b"did not arrive within 0.5 s" in data and took < 2.0


def _request_counts(url: str) -> dict[str, float]:
    """``hexamer_requests_total`` of /v1/completions by status."""
    counts = {}
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith('hexamer_requests_total{endpoint="/v1/completions"'):
            status = line.split('status="')[1].split('"')[0]
            counts[status] = float(line.rsplit(" ", 1)[1])
    return counts


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_client_gone_mid_body_is_499_without_traceback(strict: str) -> None:
    """A lying Content-Length closed early and a slow body closed early are client disconnects:
    counted under 499, no traceback logged, nothing left running."""
    caught = _Records()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "hexamer.server", "")]
    for logger in loggers:
        logger.addHandler(caught)
    try:
        before = _request_counts(strict)
        lying = _connect(strict)
        lying.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"prompt": "hi"'
        )
        slow = _connect(strict)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{")
        for piece in (b'"pro', b'mpt"'):
            time.sleep(0.05)
            slow.sendall(piece)
        time.sleep(0.05)
        lying.close()
        slow.close()
        deadline = time.monotonic() + 5
        while _request_counts(strict).get("499", 0) < before.get("499", 0) + 2:
            assert time.monotonic() < deadline, f"not counted as 499: {_request_counts(strict)}"
            time.sleep(0.02)
    finally:
        for logger in loggers:
            logger.removeHandler(caught)
    after = _request_counts(strict)
    assert after.get("500", 0) == before.get("500", 0)
    assert not [r for r in caught.records if r.exc_info or r.levelno >= logging.ERROR]
    health = httpx.get(f"{strict}/health").json()
    assert health["running"] == 0 and health["waiting"] == 0


def test_garbage_is_answered_and_closed(strict: str) -> None:
    sock = _connect(strict)
    sock.sendall(b"\x16\x03\x01\x02\x00garbage that is not HTTP\r\n\r\n")
    data, took = _read_until_closed(sock)
    assert data.startswith(b"HTTP/1.1 400") and took < 2.0


def test_connections_beyond_the_cap_get_503(strict: str) -> None:
    time.sleep(0.6)  # keep-alive connections of earlier tests are gone
    held = [_connect(strict) for _ in range(4)]
    time.sleep(0.1)
    extra = _connect(strict)
    data, _ = _read_until_closed(extra)
    assert data.startswith(b"HTTP/1.1 503") and b"too many open connections" in data
    for s in held:
        s.close()
    time.sleep(0.1)
    assert httpx.get(f"{strict}/health").status_code == 200  # capacity is back once they close


def test_drain_on_shutdown(tiny_folder: Path) -> None:
    app = create_app(tiny_folder, max_num_seqs=8, max_model_len=2048, shutdown_grace_s=1.0)
    with running_server(app) as (url, server):
        short_events: list[str] = []
        long_events: list[str] = []

        def stream(body: dict, into: list[str]) -> None:
            with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        into.append(line[6:])

        long_body = {"prompt": "hi", "max_tokens": 2000, "n": 4, "ignore_eos": True, "stream": True}
        long = threading.Thread(target=stream, args=(long_body, long_events))
        long.start()
        while not long_events:
            time.sleep(0.01)
        short_body = {"prompt": "hi", "max_tokens": 40, "ignore_eos": True, "stream": True}
        short = threading.Thread(target=stream, args=(short_body, short_events))
        short.start()
        while not short_events:
            time.sleep(0.01)

        server.drain()  # what SIGTERM does to `hexamer serve`
        start = time.perf_counter()
        health = httpx.get(f"{url}/health")
        assert health.status_code == 503 and health.json()["status"] == "shutting_down"
        r = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 1})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.headers["connection"] == "close"

        short.join(timeout=10)
        long.join(timeout=10)
        assert short_events[-1] == "[DONE]" and "error" not in short_events[-2]  # finished in the grace
        error = json.loads(long_events[-2])["error"]  # cut at the grace, with a reason
        assert error["code"] == 503 and "shut down" in error["message"]
        assert time.perf_counter() - start < 3.0
        deadline = time.monotonic() + 10
        while server.started and not server.should_exit and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.should_exit


@pytest.mark.slow
def test_sigterm_drains_the_real_command(tiny_folder: Path) -> None:
    """`hexamer serve` itself: SIGTERM -> 503 for new work, a stream cut at the grace with an error
    event, exit status 0, then connection refused."""
    import os
    import signal
    import subprocess
    import sys

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-c", "from hexamer.cli import app; app()", "serve", "-m", str(tiny_folder),
               "--port", str(port), "--max-model-len", "2048", "--shutdown-grace", "0.3", "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(command, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/health")
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.1)
        reader, events = _long_stream(url)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        assert httpx.get(f"{url}/health").status_code == 503
        assert httpx.post(f"{url}/v1/completions", json={"prompt": "hi"}).status_code == 503
        reader.join(timeout=20)
        assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == 503
        assert proc.wait(timeout=20) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/health")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_second_signal_exits_at_once(tiny_folder: Path) -> None:
    import signal

    app = create_app(tiny_folder, max_num_seqs=4, max_model_len=2048, shutdown_grace_s=30)
    with running_server(app) as (url, server):
        reader, events = _long_stream(url)
        time.sleep(0.3)
        server.handle_exit(signal.SIGTERM, None)  # drains: the stream may take its 30 s
        time.sleep(0.2)
        start = time.perf_counter()
        server.handle_exit(signal.SIGTERM, None)  # ... unless asked again
        reader.join(timeout=10)
        assert not reader.is_alive() and time.perf_counter() - start < 3.0
        assert json.loads(events[-2])["error"]["code"] == 503
