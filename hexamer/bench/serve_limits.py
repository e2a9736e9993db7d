"""``hexamer bench serve-limits``: what the largest requests the server admits cost it.

``hexamer serve`` is started in a subprocess (default settings, bar the given ones), warmed up and
left to settle; then the largest request of each kind its limits admit is sent, one kind at a time,
while another thread asks ``/health`` every 50 ms: completions with top-N ``logprobs`` of generated
tokens (``n`` choices), ``prompt_logprobs`` of the longest prompt (alone, then three at once), and
``/v1/dna/score`` with ``per_position`` on ``max_prompts`` sequences. For each: the response size
and time, the server's resident memory at rest, its peak during the request (Linux ``VmHWM``, reset
before each request through ``/proc/PID/clear_refs``) and after it, and the ``/health`` latencies.
Finally the same logprobs request one step over ``max_response_values`` must be refused (400).
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from hexamer.bench.report import BenchReport
from hexamer.bench.serve import random_prompts
from hexamer.server.settings import ServerSettings

#: logprobs choices per request (the largest request is sized from this and the bound)
CHOICES = 8
#: sequences of the score request by default (``max_prompts``, 256, takes minutes on 2 cores)
SCORE_SEQUENCES = 64


@dataclass
class Probe:
    """One request fired at the server and what it cost."""

    case: str
    request: str
    status: int
    response_bytes: int
    seconds: float
    rss_before: int | None
    rss_peak: int | None
    rss_after: int | None
    health_ms: list[float]


def proc_status_kb(pid: int, field: str) -> int | None:
    """``field`` (``VmRSS``, ``VmHWM``) of ``/proc/PID/status`` in bytes, or None (not Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak(pid: int) -> bool:
    """Reset the process's ``VmHWM`` to its current RSS (Linux 4.0+, own processes)."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(model: str, options: dict[str, Any], log: Callable[[str], None]) -> Iterator[tuple[str, int]]:
    """``hexamer serve`` on a free loopback port in a subprocess; yields (URL, pid)."""
    port = _free_port()
    command = [sys.executable, "-m", "hexamer", "serve", "--model", model, "--port", str(port),
               "--log-level", "warning"]  # fmt: skip
    for name, value in options.items():
        command += [f"--{name.replace('_', '-')}", str(value)]
    proc = subprocess.Popen(command, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start (exit status {proc.poll()})")
            time.sleep(0.2)
        log(f"server pid {proc.pid} at {url}")
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _poll_health(url: str, stop: threading.Event, out: list[float]) -> None:
    """``/health`` every 50 ms until ``stop``; a failed call (a connection reset) counts as
    infinitely slow (the table says "failed")."""
    with httpx.Client(timeout=60) as client:
        while not stop.is_set():
            start = time.perf_counter()
            try:
                client.get(f"{url}/health")
                out.append((time.perf_counter() - start) * 1000)
            except httpx.TransportError:
                out.append(math.inf)
            stop.wait(0.05)


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, int, str]:
    """Status, body bytes (read as they come and dropped) and the start of the body."""
    size = 0
    head = b""
    with httpx.stream("POST", f"{url}{path}", json=body, timeout=600) as r:
        for chunk in r.iter_bytes():
            size += len(chunk)
            if len(head) < 400:
                head += chunk[: 400 - len(head)]
    return r.status_code, size, head.decode("utf-8", "replace")


def probe(url: str, pid: int, case: str, request: str, calls: list[tuple[str, dict[str, Any]]]) -> Probe:
    """Fire ``calls`` at once while polling ``/health``; the server's RSS before, at peak, settled."""
    before = proc_status_kb(pid, "VmRSS")
    reset_peak(pid)
    health: list[float] = []
    stop = threading.Event()
    poller = threading.Thread(target=_poll_health, args=(url, stop, health), daemon=True)
    poller.start()
    results: list[tuple[int, int, str]] = [(0, 0, "")] * len(calls)

    def fire(i: int) -> None:
        results[i] = _post(url, *calls[i])

    start = time.perf_counter()
    threads = [threading.Thread(target=fire, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    stop.set()
    poller.join()
    peak = proc_status_kb(pid, "VmHWM")
    time.sleep(1.0)
    status = max(r[0] for r in results)
    if status != 200 and status != 400:
        raise RuntimeError(f"{case}: status {status}: {results[0][2][:300]}")
    return Probe(case, request, status, sum(r[1] for r in results), seconds, before, peak,
                 proc_status_kb(pid, "VmRSS"), health)  # fmt: skip


def _cases(
    url: str, model: str, settings: ServerSettings, score_sequences: int
) -> list[tuple[str, str, list[tuple[str, dict]]]]:
    """The largest admitted request of each kind, sized from the settings and the served context
    (``score_sequences`` of the longest admitted length for the score request)."""
    from hexamer.tokenizer import CarbonTokenizer

    context = int(httpx.get(f"{url}/v1/models").json()["data"][0]["max_model_len"])
    layout = CarbonTokenizer.from_pretrained(model).layout
    bound, top = settings.max_response_values, settings.max_logprobs
    new_tokens = min(bound // (CHOICES * (top + 1)), settings.max_tokens, context - 8)
    gen = {"prompt": "<dna>ACGTACGTACGT", "n": CHOICES, "logprobs": top, "max_tokens": new_tokens,
           "ignore_eos": True, "temperature": 1.0, "seed": 0}  # fmt: skip
    prompt_len = min(bound // (top + 1), context - 1)  # positions 1..L-1 carry prompt logprobs
    prompt = random_prompts(1, prompt_len, layout, seed=0)[0]
    plp = {"prompt": prompt, "max_tokens": 1, "prompt_logprobs": top}
    n_seqs = min(score_sequences, settings.max_prompts)
    bp = min(bound // n_seqs, settings.max_bp, layout.k * (context - 24))
    rng = np.random.default_rng(0)
    seqs = ["".join(rng.choice(list("ACGT"), size=bp)) for _ in range(n_seqs)]
    score = {"sequences": seqs, "per_position": True}
    over = dict(gen, max_tokens=new_tokens + 1)
    return [
        ("logprobs", f"n {CHOICES} x {new_tokens} tokens x logprobs {top}", [("/v1/completions", gen)]),
        ("prompt_logprobs", f"{prompt_len}-token prompt, prompt_logprobs {top}", [("/v1/completions", plp)]),
        ("prompt_logprobs x3", "the same, three at once", [("/v1/completions", plp)] * 3),
        ("score per_position", f"{n_seqs} x {bp:,} bp, per_position", [("/v1/dna/score", score)]),
        ("over the bound", f"logprobs with max_tokens {new_tokens + 1}", [("/v1/completions", over)]),
    ]


def run_serve_limits_bench(
    *,
    model: str | None = None,
    server_options: dict[str, Any] | None = None,
    score_sequences: int = SCORE_SEQUENCES,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Start ``hexamer serve`` for ``model`` (default: the demo model) with ``server_options`` (serve
    options by ServerSettings name, e.g. ``{"max_response_values": 2**21}``), fire the largest
    admitted requests and report memory and ``/health`` latency (module docstring).
    ``score_sequences``: sequences of the score request (at most ``max_prompts``; the default keeps
    the run short: the memory of a score request peaks on one forward, not on the count)."""
    if score_sequences < 1:
        raise ValueError(f"score_sequences must be >= 1, got {score_sequences}")
    from hexamer.default_model import default_model

    options = dict(server_options or {})
    settings = ServerSettings.from_options(**options)
    model = model or str(default_model()[0])
    with served(model, options, log) as (url, pid):
        warm = [("/v1/completions", {"prompt": "<dna>ACGTAC", "max_tokens": 2, "logprobs": 5}),
                ("/v1/dna/score", {"sequences": ["ACGT" * 50], "per_position": True})]  # fmt: skip
        for path, body in warm:
            _post(url, path, body)
        time.sleep(1.0)
        idle = proc_status_kb(pid, "VmRSS")
        log(f"idle RSS {idle / 2**20:.0f} MiB" if idle else "RSS not readable (/proc)")
        probes = []
        for case, request, calls in _cases(url, model, settings, score_sequences):
            probes.append(probe(url, pid, case, request, calls))
            p = probes[-1]
            log(f"{case}: status {p.status}, {p.response_bytes / 1e6:.1f} MB in {p.seconds:.1f} s, "
                f"/health max {max(p.health_ms, default=0):.0f} ms")  # fmt: skip
    return _report(probes, idle, model, settings)


def _worst(ms: list[float]) -> float | str | None:
    worst = max(ms, default=None)
    return "failed" if worst == math.inf else worst


def _mib(value: int | None) -> float | None:
    return None if value is None else value / 2**20


def _report(probes: list[Probe], idle: int | None, model: str, settings: ServerSettings) -> BenchReport:
    report = BenchReport(
        name="serve-limits",
        title=f"serve limits: {Path(model).name}, max_response_values {settings.max_response_values:,}, "
        f"max_logprobs {settings.max_logprobs}",
        columns=[
            "case",
            "request",
            "status",
            "response MB",
            "seconds",
            "RSS before MiB",
            "RSS peak MiB",
            "peak - before MiB",
            "RSS after MiB",
            "/health max ms",
            "/health median ms",
        ],
        formats={
            "response MB": "{:,.1f}",
            "seconds": "{:.2f}",
            "RSS before MiB": "{:,.0f}",
            "RSS peak MiB": "{:,.0f}",
            "peak - before MiB": "{:+,.0f}",
            "RSS after MiB": "{:,.0f}",
            "/health max ms": "{:,.0f}",
            "/health median ms": "{:,.1f}",
        },
        notes=[
            "hexamer serve in a subprocess, default settings but the ones in the title; requests of a case "
            "sent at once while /health is asked every 50 ms; RSS from /proc/PID/status (peak: VmHWM, reset "
            "before each case), settled 1 s after it",
            "idle RSS (after a warm-up, before the first case): "
            + ("unknown" if idle is None else f"{idle / 2**20:,.0f} MiB"),
        ],
    )
    for p in probes:
        report.rows.append({
            "case": p.case, "request": p.request, "status": p.status, "response MB": p.response_bytes / 1e6,
            "seconds": p.seconds, "RSS before MiB": _mib(p.rss_before), "RSS peak MiB": _mib(p.rss_peak),
            "peak - before MiB": None if p.rss_peak is None or p.rss_before is None
            else _mib(p.rss_peak - p.rss_before), "RSS idle MiB": _mib(idle),
            "RSS after MiB": _mib(p.rss_after), "/health max ms": _worst(p.health_ms),
            "/health median ms": float(np.median(p.health_ms)) if p.health_ms else None,
        })  # fmt: skip
    return report
