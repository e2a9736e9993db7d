"""``hexamer bench serve``: the published serving workload against any OpenAI-compatible server.

The shape of the Carbon serving runs (``vllm bench serve --endpoint /v1/completions``): N prompts of
random DNA (``<dna>`` + random 6-mers, sent as token ids so every prompt has exactly the asked
length), a fixed number of new tokens per request with ``ignore_eos`` (so every request generates
all of them), greedy decoding, all requests sent at once or at a Poisson rate, at most C in flight.
Every request is streamed, and the summary has the figures ``vllm bench serve`` prints: request and
token throughput, TTFT (time to first token), TPOT (time per output token after the first:
``(latency - TTFT) / (output tokens - 1)``), ITL (time between streamed chunks) and end-to-end
latency, each as mean, median and p99 in ms; plus bp/s = output tok/s x 6 (one 6-mer per token).

Defaults reproduce the published orchestrator (``run_serving_benchmarks.py``): 16 prompts, 1,000 bp
of context (the last 996 bp: 166 6-mers after ``<dna>`` = 167 prompt tokens) and 1,000 bp out
(167 tokens), temperature 0. ``input_len``/``output_len`` set token counts directly (the A10
runs of seed 002: 2,048 in, 8,192 out, 256 prompts, concurrency 12).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.bench.report import BenchReport
from hexamer.remote.http import Connection

QUICK = {"num_prompts": 8, "input_bp": 60, "output_bp": 60, "max_concurrency": 4}


@dataclass
class RequestResult:
    """Timings of one streamed request (seconds)."""

    ok: bool
    prompt_len: int
    output_len: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itls: list[float] = field(default_factory=list)
    error: str | None = None


@dataclass
class Workload:
    prompts: list[list[int]]
    output_len: int
    #: the warm-up request's prompt: none of ``prompts``, so no prompt of the round finds its blocks in
    #: a prefix cache (None: the first prompt)
    warm_prompt: list[int] | None = None

    @property
    def input_len(self) -> int:
        return len(self.prompts[0])


def random_prompts(num_prompts: int, input_len: int, layout: Any, seed: int) -> list[list[int]]:
    """``<dna>`` + ``input_len - 1`` random 6-mer ids per prompt (a fixed seed: the same prompts
    for every server compared)."""
    if input_len < 2:
        raise ValueError(f"input length must be at least 2 tokens (<dna> + one 6-mer), got {input_len}")
    rng = np.random.default_rng(seed)
    kmers = rng.integers(layout.kmer_start, layout.kmer_stop, size=(num_prompts, input_len - 1))
    return [[layout.begin_id, *row.tolist()] for row in kmers]


def token_lengths(input_bp: int, output_bp: int, k: int = 6) -> tuple[int, int]:
    """The orchestrator's rule: the last floor(in/k) whole k-mers after ``<dna>``; ceil(out/k) new."""
    if input_bp < k or output_bp < 1:
        raise ValueError(f"need input_bp >= {k} and output_bp >= 1, got {input_bp} and {output_bp}")
    return 1 + input_bp // k, -(-output_bp // k)


#: what each endpoint is asked: OpenAI completions (whole-vocabulary sampling, as vLLM), or
#: hexamer's /v1/dna/generate (6-mer sampling from the DNA block of the head, as ``Carbon.generate``)
ENDPOINTS = {"completions": "/v1/completions", "dna": "/v1/dna/generate"}


async def _one(
    conn: Connection, body: dict[str, Any], path: str = "/v1/completions", k: int = 6
) -> RequestResult:
    dna = path == ENDPOINTS["dna"]
    result = RequestResult(ok=False, prompt_len=body.pop("_prompt_len", None) or len(body["prompt"]))
    start = time.perf_counter()
    last = start
    chunks = 0
    bases = 0
    usage: int | None = None
    try:
        async for event in conn.stream_events(path, body):
            now = time.perf_counter()
            if isinstance(event.get("usage"), dict) and event["usage"].get("completion_tokens") is not None:
                usage = int(event["usage"]["completion_tokens"])
            if event.get("object") == "error" or "error" in event:  # an error sent inside the stream
                detail = event.get("error", event)
                raise RuntimeError(str(detail.get("message", detail) if isinstance(detail, dict) else detail))
            if not event.get("choices"):  # the usage-only chunk; a token's text may be "" (partial UTF-8)
                continue
            if dna:
                bases += sum(len(c.get("delta") or "") for c in event["choices"])
            if chunks == 0:
                result.ttft = now - start
            else:
                result.itls.append(now - last)
            last = now
            chunks += 1
        result.latency = time.perf_counter() - start
        result.output_len = -(-bases // k) if dna else usage if usage is not None else chunks
        result.ok = chunks > 0
        if not result.ok:
            result.error = "the stream carried no token"
    except Exception as exc:  # a failed request is counted, never fatal
        result.error = f"{type(exc).__name__}: {exc}"
    return result


async def _run(
    conn: Connection,
    model: str,
    work: Workload,
    *,
    temperature: float,
    request_rate: float,
    seed: int,
    log: Callable[[str], None],
    endpoint: str = "completions",
    layout: Any = None,
) -> tuple[list[RequestResult], float]:
    path = ENDPOINTS[endpoint]

    def body(prompt: list[int], max_tokens: int) -> dict[str, Any]:
        if endpoint == "dna":  # the same tokens as DNA text: the server adds <dna> back
            from hexamer.tokenizer.dna import kmers_to_bases

            return {
                "model": model,
                "prompt": kmers_to_bases([t - layout.kmer_start for t in prompt[1:]], layout.k),
                "max_tokens": max_tokens,
                "mode": "token",
                "temperature": temperature,
                "stream": True,
                "_prompt_len": len(prompt),
            }
        return {
            "model": model,
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }

    k = layout.k if layout is not None else 6
    warm_prompt = work.warm_prompt if work.warm_prompt is not None else work.prompts[0]
    warm = await _one(conn, body(warm_prompt, min(4, work.output_len)), path, k)
    if not warm.ok:
        raise RuntimeError(f"the warm-up request to {conn.url(path)} failed: {warm.error}")
    rng = random.Random(seed)
    tasks = []
    start = time.perf_counter()
    for prompt in work.prompts:
        tasks.append(asyncio.create_task(_one(conn, body(prompt, work.output_len), path, k)))
        if math.isfinite(request_rate):
            await asyncio.sleep(rng.expovariate(request_rate))
    results = []
    for done in asyncio.as_completed(tasks):
        results.append(await done)
        if len(results) % max(1, len(tasks) // 4) == 0:
            log(f"{len(results)}/{len(tasks)} requests done")
    return results, time.perf_counter() - start


def _ms(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "median": None, "p99": None}
    arr = np.asarray(values) * 1000
    return {"mean": float(arr.mean()), "median": float(np.median(arr)), "p99": float(np.percentile(arr, 99))}


def summarize(results: list[RequestResult], duration: float, k: int = 6) -> dict[str, Any]:
    """vLLM's summary keys (``request_throughput``, ``mean_ttft_ms``, ``p99_itl_ms``, ...) + bp/s."""
    ok = [r for r in results if r.ok]
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_len for r in ok)
    summary: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "duration": duration,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "output_bp_throughput": total_out * k / duration,
    }
    tpots = [(r.latency - r.ttft) / (r.output_len - 1) for r in ok if r.output_len > 1]
    series = {
        "ttft": [r.ttft for r in ok],
        "tpot": tpots,
        "itl": [x for r in ok for x in r.itls],
        "e2el": [r.latency for r in ok],
    }
    for name, values in series.items():
        for stat, value in _ms(values).items():
            summary[f"{stat}_{name}_ms"] = value
    errors = [r.error for r in results if not r.ok and r.error]
    summary["first_error"] = errors[0] if errors else None
    return summary


_ROWS = [
    ("Successful requests", "completed"),
    ("Failed requests", "failed"),
    ("Benchmark duration (s)", "duration"),
    ("Total input tokens", "total_input_tokens"),
    ("Total generated tokens", "total_output_tokens"),
    ("Request throughput (req/s)", "request_throughput"),
    ("Output token throughput (tok/s)", "output_throughput"),
    ("Total token throughput (tok/s)", "total_token_throughput"),
    ("Output throughput (bp/s)", "output_bp_throughput"),
]
_LATENCIES = [("TTFT (ms)", "ttft"), ("TPOT (ms)", "tpot"), ("ITL (ms)", "itl"), ("E2E latency (ms)", "e2el")]


def build_report(summary: dict[str, Any], title: str, notes: list[str]) -> BenchReport:
    report = BenchReport(
        name="serve",
        title=title,
        columns=["metric", "value", "mean", "median", "p99"],
        formats={"mean": "{:,.2f}", "median": "{:,.2f}", "p99": "{:,.2f}"},
        notes=notes,
    )
    for label, key in _ROWS:
        value = summary[key]
        report.rows.append({"metric": label, "key": key, "value": value})
    for label, key in _LATENCIES:
        report.rows.append(
            {
                "metric": label,
                "key": key,
                **{stat: summary[f"{stat}_{key}_ms"] for stat in ("mean", "median", "p99")},
            }
        )
    return report


def latency_plot(report: BenchReport, path: Path) -> Path:
    """Grouped bars: mean / median / p99 of TTFT, TPOT, ITL and E2E latency (ms, log scale)."""
    long = BenchReport(name="serve-latency", title=report.title, columns=["metric", "stat", "ms"])
    for row in report.rows:
        if "mean" in row:
            for stat in ("mean", "median", "p99"):
                long.rows.append(
                    {"metric": row["metric"].replace(" (ms)", ""), "stat": stat, "ms": row[stat]}
                )
    return long.plot(path, x="metric", y="ms", group="stat", log_y=True)


@contextlib.contextmanager
def _target(url: str | None, model: Any, settings: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(base URL, what it is): the given server, or hexamer's own started in this process."""
    if url is not None:
        if model is not None:
            raise ValueError("give --url (a running server) or --model (start hexamer's), not both")
        yield url, "remote server"
        return
    from hexamer.server.testing import serve_in_thread

    assert model is not None  # run_serve_bench resolved the default
    name = Path(str(model if isinstance(model, str | Path) else model.tokenizer.name_or_path)).name
    with serve_in_thread(model, **settings) as local_url:
        yield local_url, f"hexamer server in this process ({name})"


@dataclass(frozen=True)
class _Plan:
    """The workload and how it is sent: every number the rounds, title and notes need."""

    num_prompts: int
    in_len: int
    out_len: int
    concurrency: int
    request_rate: float
    temperature: float
    seed: int
    endpoint: str
    rounds: int


@dataclass
class _Measured:
    """What the rounds against one server gave: where it ran, the last round's summary and each
    round's output tok/s (and the offline engine's, when compared)."""

    base: str
    what: str
    backend: str
    name: str
    k: int
    summary: dict[str, Any]
    server_rates: list[float] = field(default_factory=list)
    offline_rates: list[float] = field(default_factory=list)
    #: per round, the most requests the server's ``/health`` reported running at once (None: not
    #: reported; hexamer's server reports it)
    peak_running: list[int | None] = field(default_factory=list)


def _check_serve_options(
    num_prompts: int, endpoint: str, request_rate: float, rounds: int, compare_offline: bool, url: str | None
) -> None:
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be >= 1, got {num_prompts}")
    if endpoint not in ENDPOINTS:
        raise ValueError(f"endpoint must be one of {', '.join(ENDPOINTS)}, got {endpoint!r}")
    if not (request_rate > 0):
        raise ValueError(f"request_rate must be > 0 (inf = all at once), got {request_rate}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if compare_offline and url is not None:
        raise ValueError("comparing with the offline engine needs hexamer's own server (--model), not --url")


def _measure(
    base: str,
    what: str,
    plan: _Plan,
    *,
    api_key: str | None,
    served_model: str | None,
    tokenizer: str | None,
    carbon: Any,
    log: Callable[[str], None],
) -> _Measured:
    """Run the workload ``plan.rounds`` times against the server at ``base`` (and, with ``carbon``,
    offline after each server round)."""
    from hexamer.remote.backend import load_server_tokenizer
    from hexamer.remote.protocol import detect

    conn = Connection(base, api_key=api_key, max_in_flight=plan.concurrency, max_retries=0, timeout=3600)
    try:
        info = conn.run(detect(conn))
        name = served_model or (info.models[0] if info.models else None)
        if name is None:
            raise ValueError(f"{base}/v1/models lists no model; pass --served-model")
        tok, _ = load_server_tokenizer(tokenizer, info, name)
        work = round_workload(plan, tok.layout, 0)
        log(
            f"{what} at {base} ({info.backend}): {plan.num_prompts} prompts, "
            f"{plan.in_len} in / {plan.out_len} out tokens"
        )
        if carbon is not None:  # its first-call costs (packing, kernels) before any timing
            carbon.generate(_dna_prompts(work.prompts[:1], tok.layout), max_new_tokens=2, mode="token")
        measured = _Measured(base, what, info.backend, name, tok.layout.k, {})
        for r in range(plan.rounds):
            work = round_workload(plan, tok.layout, r)
            with HealthPoll(base) as poll:
                results, duration = conn.run(
                    _run(
                        conn,
                        name,
                        work,
                        temperature=plan.temperature,
                        request_rate=plan.request_rate,
                        seed=plan.seed,
                        log=log,
                        endpoint=plan.endpoint,
                        layout=tok.layout,
                    )
                )
            measured.peak_running.append(poll.peak_running)
            measured.summary = summarize(results, duration, measured.k)
            measured.server_rates.append(measured.summary["output_throughput"])
            if carbon is not None:
                offline = _offline_rate(carbon, work, tok.layout, plan.temperature, plan.concurrency)
                measured.offline_rates.append(offline)
                log(
                    f"round {r + 1}/{plan.rounds}: server {measured.server_rates[-1]:.1f} tok/s, "
                    f"offline engine {offline:.1f} tok/s"
                )
        return measured
    finally:
        conn.close()


def round_workload(plan: _Plan, layout: Any, round_index: int) -> Workload:
    """Round ``round_index``'s prompts (seed ``plan.seed + round_index``) and a warm-up prompt of
    its own: every round sends prompts no earlier round or warm-up sent, so a prefix cache (the
    server's, the offline engine's) skips no prompt's prefill and the figures are of real work."""
    prompts = random_prompts(plan.num_prompts + 1, plan.in_len, layout, plan.seed + round_index)
    return Workload(prompts[:-1], plan.out_len, warm_prompt=prompts[-1])


class HealthPoll:
    """Asks ``base/health`` every ``interval`` seconds on a thread of its own while the block runs and
    keeps the most requests it reported running at once (``peak_running``; None when the server
    reports none: not hexamer's)."""

    def __init__(self, base: str, interval: float = 0.2) -> None:
        import threading

        self.base = base
        self.interval = interval
        self.peak_running: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="bench-health-poll", daemon=True)

    def _poll(self) -> None:
        import httpx

        with httpx.Client(timeout=5) as client:
            while not self._stop.wait(self.interval):
                try:
                    running = client.get(f"{self.base}/health").json().get("running")
                except (httpx.HTTPError, ValueError, AttributeError):
                    continue
                if isinstance(running, int):
                    self.peak_running = max(self.peak_running or 0, running)

    def __enter__(self) -> HealthPoll:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _serve_title(m: _Measured, plan: _Plan) -> str:
    rate = "all at once" if not math.isfinite(plan.request_rate) else f"Poisson {plan.request_rate:g} req/s"
    shown = Path(m.name).name if Path(m.name).is_absolute() else m.name  # a local folder: its name only
    return (
        f"serving: {shown} on {m.backend} {ENDPOINTS[plan.endpoint]} — {plan.num_prompts} prompts × "
        f"{plan.in_len} in / {plan.out_len} out tokens, ≤{plan.concurrency} in flight, {rate}"
    )


def _serve_notes(
    m: _Measured, plan: _Plan, own_server: bool, settings: dict[str, Any], sized: bool = True
) -> list[str]:
    path = ENDPOINTS[plan.endpoint]
    notes = [
        f"target: {m.what} at {m.base}; streamed {path}"
        + (", ignore_eos" if plan.endpoint == "completions" else ", mode token")
        + f", temperature {plan.temperature:g}, random <dna> + 6-mer prompts (seed {plan.seed})",
        f"bp/s = output tok/s × {m.k} (one {m.k}-mer per token); TPOT = (latency − TTFT) / (tokens − 1); "
        "ITL = gap between streamed chunks",
    ]
    if own_server:
        notes.append("the load generator shares this process and its CPU cores with the server")
        if sized:
            notes.append(f"hexamer's server started with max_num_seqs {settings['max_num_seqs']}, max_model_len "
                         f"{settings['max_model_len']} (prompt + new tokens of the workload)")  # fmt: skip
        else:
            given = ", ".join(f"{k} {v}" for k, v in settings.items())
            notes.append(
                f"hexamer's server started with its defaults, not sized to the workload (options given: {given})"
            )
    notes.append("each round sends new prompts (seed + round) after a warm-up prompt of its own: no prefix cache "
                 "skips a prompt the server or the offline engine saw before")  # fmt: skip
    if m.summary["failed"]:
        notes.append(f"{m.summary['failed']} requests failed; first error: {m.summary['first_error']}")
    return notes


def _add_round_rows(report: BenchReport, m: _Measured, plan: _Plan) -> None:
    """Per-round server throughput (several rounds) and the offline comparison (when made)."""
    server_rates, offline_rates = m.server_rates, m.offline_rates
    peaks = [p for p in m.peak_running if p is not None]
    if peaks:
        report.rows.append({"metric": "Most requests running at once (server /health)", "key": "peak_running",
                            "value": max(peaks), "rounds": m.peak_running})  # fmt: skip
    if plan.rounds > 1:
        report.rows.append({"metric": "Server output tok/s per round", "key": "server_rounds",
                            "value": float(np.median(server_rates)), "rounds": server_rates})  # fmt: skip
    if offline_rates:
        ratios = [a / b for a, b in zip(server_rates, offline_rates, strict=True)]
        report.rows.append({"metric": "Offline engine output tok/s (median of rounds)", "key": "offline_throughput",
                            "value": float(np.median(offline_rates)), "rounds": offline_rates})  # fmt: skip
        report.rows.append({"metric": "Server / offline engine (median of rounds)", "key": "server_vs_offline",
                            "value": float(np.median(ratios)), "rounds": ratios})  # fmt: skip
        report.notes.append(
            f"server vs offline engine, {plan.rounds} alternating rounds (server then offline, same model "
            f"object, same prompts, token mode, {plan.out_len} new tokens, batch {plan.concurrency}): ratios "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + f" (min {min(ratios):.2f}, max {max(ratios):.2f})"
        )


def run_serve_bench(
    *,
    url: str | None = None,
    model: str | None = None,
    served_model: str | None = None,
    api_key: str | None = None,
    tokenizer: str | None = None,
    num_prompts: int = 16,
    input_bp: int = 1000,
    output_bp: int = 1000,
    input_len: int | None = None,
    output_len: int | None = None,
    max_concurrency: int | None = None,
    request_rate: float = math.inf,
    temperature: float = 0.0,
    seed: int = 0,
    quick: bool = False,
    server_settings: dict[str, Any] | None = None,
    endpoint: str = "completions",
    rounds: int = 1,
    compare_offline: bool = False,
    server_defaults: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Run the workload against ``url`` (or hexamer's server for ``model``, started here) and return
    the summary. ``quick``: 8 prompts of 60 bp in / 60 bp out, 4 at a time (seconds on a tiny model).
    ``endpoint``: ``completions`` (OpenAI, whole-vocabulary sampling; what vLLM serves) or ``dna``
    (hexamer's ``/v1/dna/generate`` in token mode: the same tokens, sampled from the DNA block of
    the head as ``Carbon.generate`` and ``hexamer bench generate`` do).

    hexamer's own server is started with ``max_model_len`` = the workload's prompt + new tokens (as
    serving benchmarks size vLLM), so its KV-cache rows are sized like the offline engine's, which
    sizes its cache to the work: with the model's whole context per row, the memory budget may hold
    fewer rows than requests in flight (the ``kv_rows`` note says how many it made).
    ``server_defaults``: start it with its own defaults instead (the model's context per sequence,
    64 sequences, the default KV pool), as a deployment serving requests of any length would run.

    ``rounds``: the workload is run that many times (the table is the last round). With
    ``compare_offline`` (hexamer's own server only), the same model object also runs the same
    prompts offline (``Carbon.generate``, token mode, same lengths and temperature, in batches of
    the server's concurrency)
    after each server round, and the report gives both throughputs per round and their ratio."""
    if quick:
        num_prompts = min(num_prompts, QUICK["num_prompts"])
        input_bp, output_bp = QUICK["input_bp"], QUICK["output_bp"]
        max_concurrency = max_concurrency or QUICK["max_concurrency"]
    _check_serve_options(num_prompts, endpoint, request_rate, rounds, compare_offline, url)
    concurrency = min(max_concurrency or num_prompts, num_prompts)
    in_len, out_len = token_lengths(input_bp, output_bp)
    in_len, out_len = input_len or in_len, output_len or out_len
    plan = _Plan(num_prompts, in_len, out_len, concurrency, request_rate, temperature, seed, endpoint, rounds)
    sized = {
        "max_num_seqs": max(concurrency, 1),
        "max_model_len": in_len + out_len + 8,  # rows sized to the work, like the offline engine's cache
    }
    # a round of 64 requests on a large model can outlast the server's 600-s request timeout on a
    # small machine: the load generator's own timeout (an hour) rules instead
    settings = {**({} if server_defaults else sized), "request_timeout_s": 3600.0, **(server_settings or {})}
    if url is None and model is None:  # hexamer's own server on the default model
        from hexamer.default_model import builtin_tiny_model, default_model

        model = str(builtin_tiny_model() if quick else default_model()[0])
    carbon = None
    if compare_offline:
        from hexamer import Carbon

        carbon = Carbon.from_pretrained(model, max_batch_size=concurrency)
    with _target(url, carbon if carbon is not None else model, settings) as (base, what):
        m = _measure(
            base,
            what,
            plan,
            api_key=api_key,
            served_model=served_model,
            tokenizer=tokenizer,
            carbon=carbon,
            log=log,
        )
    notes = _serve_notes(m, plan, url is None, settings, sized=not server_defaults)
    report = build_report(m.summary, _serve_title(m, plan), notes)
    _add_round_rows(report, m, plan)
    return report


def _dna_prompts(prompts: list[list[int]], layout: Any) -> list[str]:
    """The workload's token prompts as DNA text (``<dna>`` dropped: ``Carbon.generate`` adds it)."""
    from hexamer.tokenizer.dna import kmers_to_bases

    return [kmers_to_bases([t - layout.kmer_start for t in p[1:]], layout.k) for p in prompts]


def _offline_rate(carbon: Any, work: Workload, layout: Any, temperature: float, batch: int) -> float:
    """Output tokens per second of ``Carbon.generate`` on the workload (token mode, same lengths)."""
    prompts = _dna_prompts(work.prompts, layout)
    start = time.perf_counter()
    gens = []
    for i in range(0, len(prompts), batch):
        gens += carbon.generate(
            prompts[i : i + batch], max_new_tokens=work.output_len, mode="token", temperature=temperature
        )
    seconds = time.perf_counter() - start
    return sum(g.n_new_tokens for g in gens) / seconds
