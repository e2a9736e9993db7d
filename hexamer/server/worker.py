"""The engine thread and its bridge to asyncio.

One thread owns the model: it admits new requests, runs engine steps (continuous batching: every
running sequence advances one token per decode step, whatever endpoint it came from) and runs
one-shot jobs (scoring, embeddings, VEP) between steps. After each step it posts
``(tokens so far, finished)`` to each advanced request's asyncio queue with
``call_soon_threadsafe``; it never waits for a client, so a slow or vanished reader cannot stall
anyone else. Cancelling (a client disconnect, a timeout) drops the request from the scheduler
before the next step and frees its KV-cache row at once.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch

from hexamer.engine import Engine, Request, RequestState
from hexamer.server.metrics import ServerMetrics

log = logging.getLogger("hexamer.server")
T = TypeVar("T")


class QueueFull(Exception):
    """More work is waiting than the server accepts (HTTP 429)."""


class ShuttingDown(Exception):
    """The server is stopping and takes no new work (HTTP 503)."""


class TimedOut(Exception):
    """A job's deadline passed before its result was ready (HTTP 504)."""


@dataclass(eq=False)
class Submission:
    """One engine request and where to report its progress: ``(index, n_tokens, finished)``
    tuples on ``queue`` (one queue per HTTP request, shared by its choices)."""

    request: Request
    index: int
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[tuple[int, int, bool]]
    published: int = 0
    #: why the request ended without a result, and the HTTP status to answer it with (503: the
    #: server stopped; 500: the engine failed it, e.g. the model's output was NaN or infinite)
    error: str | None = None
    error_status: int = 503
    submitted_at: float = field(default_factory=time.perf_counter)


@dataclass(eq=False)
class _Job:
    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    #: ``time.monotonic()`` after which the job is not started (its client has been answered 504)
    deadline: float | None = None


class EngineWorker:
    """Runs ``engine`` on a background thread; coroutines submit, cancel and await work."""

    def __init__(self, engine: Engine, *, max_queue: int, metrics: ServerMetrics) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self.metrics = metrics
        # preallocated once, as the engine config sizes it: never resized while serving
        engine.cache.ensure(engine.max_len, engine.config.max_batch_size)
        assert engine.cache.cache is not None
        self.max_len = engine.cache.cache.max_len
        self.rows = engine.cache.cache.batch_size
        self._commands: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._subs: dict[int, Submission] = {}
        self._jobs: list[_Job] = []
        self._pending = 0  # submitted, not yet handed to the scheduler
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self.accepting = True
        self._thread = threading.Thread(target=self._run, name="hexamer-engine", daemon=True)

    # ------------------------------------------------------------------ from the event loop
    def start(self) -> None:
        self._thread.start()

    @property
    def waiting(self) -> int:
        return self._pending + len(self.engine.scheduler.waiting)

    @property
    def running(self) -> int:
        return len(self.engine.scheduler.running)

    @property
    def rows_used(self) -> int:
        return self.rows - len(self.engine.cache.free_rows)

    @property
    def busy(self) -> bool:
        """Requests or jobs are in flight (submitted and not yet answered)."""
        return bool(self._subs or self._pending or self._jobs)

    def abort(self, reason: str) -> None:
        """Stop taking work and end everything in flight with ``reason`` (streams get an error event)."""
        self.accepting = False
        self._commands.put(("abort", reason))

    def submit(self, subs: list[Submission]) -> None:
        """Queue requests for the engine; all or none (429 when the queue is full)."""
        if not self.accepting:
            raise ShuttingDown("the server is shutting down")
        if self.waiting + len(subs) > self.max_queue:
            raise QueueFull(
                f"{self.waiting} sequences are already waiting (limit {self.max_queue}); retry later"
            )
        with self._pending_lock:
            self._pending += len(subs)
        self._commands.put(("add", subs))

    def cancel(self, subs: list[Submission]) -> None:
        """Drop requests wherever they are (a no-op for finished ones)."""
        if subs:
            self._commands.put(("cancel", subs))

    async def run_job(self, fn: Callable[[], T], deadline: float | None = None) -> T:
        """Run ``fn`` on the engine thread between steps (it owns the model) and await its result.

        With a ``deadline`` (``time.monotonic()``), :class:`TimedOut` is raised when it passes;
        a job still queued then is never started (one already running finishes unread)."""
        if not self.accepting:
            raise ShuttingDown("the server is shutting down")
        loop = asyncio.get_running_loop()
        job = _Job(fn, loop, loop.create_future(), deadline)
        self._commands.put(("job", job))
        if deadline is None:
            return await job.future
        try:
            return await asyncio.wait_for(job.future, max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            raise TimedOut("the job's deadline passed") from None

    def stop(self, grace_s: float) -> None:
        """Stop taking work, let in-flight requests finish for up to ``grace_s``, cancel the rest."""
        self.accepting = False
        deadline = time.monotonic() + grace_s
        while self.busy and time.monotonic() < deadline:
            time.sleep(0.02)
        self._commands.put(("shutdown", None))
        self._thread.join(timeout=30)

    # ------------------------------------------------------------------ engine thread
    def _run(self) -> None:
        with torch.inference_mode():
            while not self._stop.is_set():
                busy = self.engine.scheduler.has_work or bool(self._jobs)
                self._drain(block=not busy)
                if self._jobs:
                    self._run_job(self._jobs.pop(0))
                if self.engine.scheduler.has_work:
                    self._step()
                self._update_gauges()
        self._abort_all("the server shut down")

    def _drain(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle(*command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "add":
            with self._pending_lock:
                self._pending -= len(payload)
            for sub in payload:
                self._subs[sub.request.request_id] = sub
                self.engine.scheduler.add(sub.request)
        elif kind == "cancel":
            for sub in payload:
                known = self._subs.pop(sub.request.request_id, None) is not None
                if known and sub.request.state is not RequestState.FINISHED:
                    self.engine.cancel(sub.request)
        elif kind == "job":
            self._jobs.append(payload)
        elif kind == "abort":
            self._abort_all(payload)
        elif kind == "shutdown":
            self._stop.set()

    def _run_job(self, job: _Job) -> None:
        if job.deadline is not None and time.monotonic() >= job.deadline:
            job.loop.call_soon_threadsafe(_set_exception, job.future, TimedOut("the job's deadline passed"))
            return  # its client has its 504 already: the model's time goes to the others
        try:
            result = job.fn()
        except BaseException as exc:  # handed to the awaiting coroutine, never kills the thread
            job.loop.call_soon_threadsafe(_set_exception, job.future, exc)
        else:
            job.loop.call_soon_threadsafe(_set_result, job.future, result)

    def _step(self) -> None:
        try:
            self.engine.step()
        except Exception as exc:  # fail the step's requests, keep serving the others
            log.exception("engine step failed")
            failed = list(self.engine.scheduler.running)
            for req in failed:
                self.engine.cancel(req)
                sub = self._subs.pop(req.request_id, None)
                if sub is not None:
                    sub.error, sub.error_status = f"engine error: {exc}", 500
                    self._publish(sub, finished=True)
            return
        advanced = self.engine.take_last_step()
        self.metrics.generated_tokens.inc(len(advanced))
        for req in advanced:
            sub = self._subs.get(req.request_id)
            if sub is None:
                continue
            finished = req.state is RequestState.FINISHED
            if req.error is not None:  # the engine failed it (non-finite logits): a 500 naming why
                sub.error, sub.error_status = req.error, 500
            self._publish(sub, finished)
            if finished:
                del self._subs[req.request_id]

    def _publish(self, sub: Submission, finished: bool) -> None:
        count = sub.request.n_generated
        sub.published = count
        sub.loop.call_soon_threadsafe(sub.queue.put_nowait, (sub.index, count, finished))

    def _update_gauges(self) -> None:
        m = self.metrics
        m.queue_depth.set(self.waiting)
        m.running.set(self.running)
        m.kv_rows_used.set(self.rows_used)
        m.kv_usage.set(self.rows_used / self.rows if self.rows else 0.0)

    def _abort_all(self, reason: str) -> None:
        for sub in list(self._subs.values()):
            if sub.request.state is not RequestState.FINISHED:
                self.engine.cancel(sub.request)
            sub.error = reason
            self._publish(sub, finished=True)
        self._subs.clear()
        for job in self._jobs:
            job.loop.call_soon_threadsafe(_set_exception, job.future, ShuttingDown(reason))
        self._jobs.clear()
        self._update_gauges()


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
