"""The engine thread and its bridge to asyncio.

One thread owns the model: it admits new requests, runs engine steps (continuous batching: every
running sequence advances one token per decode step, whatever endpoint it came from) and runs
one-shot jobs (scoring, embeddings, VEP) between steps. After each step it posts
``(tokens so far, finished)`` to each advanced request's asyncio queue with
``call_soon_threadsafe``; it never waits for a client, so a slow or vanished reader cannot stall
anyone else. Cancelling (a client disconnect, a timeout) drops the request from the engine
before the next step and frees its KV-cache row at once.

Coroutines talk to the thread by commands, one small frozen dataclass each (:class:`Add`,
:class:`Cancel`, :class:`RunJob`, :class:`Abort`, :class:`Shutdown`); the thread drives the engine
only through its serving door (``add``, ``cancel``, ``has_work``, the counts, ``step``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

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
class Job:
    """A one-shot function for the engine thread and the future its result goes to."""

    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    #: ``time.monotonic()`` after which the job is not started (its client has been answered 504)
    deadline: float | None = None


@dataclass(frozen=True)
class Add:
    """Hand these submissions' requests to the engine (``Engine.add``)."""

    subs: tuple[Submission, ...]


@dataclass(frozen=True)
class Cancel:
    """Drop these submissions' requests wherever they are (a no-op for finished ones)."""

    subs: tuple[Submission, ...]


@dataclass(frozen=True)
class RunJob:
    """Run a job between engine steps."""

    job: Job


@dataclass(frozen=True)
class Abort:
    """End everything in flight with ``reason`` (the server stops taking work)."""

    reason: str


@dataclass(frozen=True)
class Shutdown:
    """Stop the engine thread."""


Command: TypeAlias = Add | Cancel | RunJob | Abort | Shutdown


class EngineWorker:
    """Runs ``engine`` on a background thread; coroutines submit, cancel and await work."""

    def __init__(self, engine: Engine, *, max_queue: int, metrics: ServerMetrics) -> None:
        self.engine = engine
        self.max_queue = max_queue
        self.metrics = metrics
        # preallocated once, as the engine config sizes it: never resized while serving
        self.rows = engine.reserve()
        self.max_len = engine.max_len
        self._commands: queue.SimpleQueue[Command] = queue.SimpleQueue()
        self._subs: dict[int, Submission] = {}
        self._jobs: list[Job] = []
        self._pending = 0  # submitted, not yet handed to the engine
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self.accepting = True
        self._thread = threading.Thread(target=self._run, name="hexamer-engine", daemon=True)

    # ------------------------------------------------------------------ from the event loop
    def start(self) -> None:
        self._thread.start()

    @property
    def waiting(self) -> int:
        return self._pending + self.engine.n_waiting

    @property
    def running(self) -> int:
        return self.engine.n_running

    @property
    def rows_used(self) -> int:
        return self.rows - self.engine.n_free_rows

    @property
    def busy(self) -> bool:
        """Requests or jobs are in flight (submitted and not yet answered)."""
        return bool(self._subs or self._pending or self._jobs)

    def abort(self, reason: str) -> None:
        """Stop taking work and end everything in flight with ``reason`` (streams get an error event)."""
        self.accepting = False
        self._commands.put(Abort(reason))

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
        self._commands.put(Add(tuple(subs)))

    def cancel(self, subs: list[Submission]) -> None:
        """Drop requests wherever they are (a no-op for finished ones)."""
        if subs:
            self._commands.put(Cancel(tuple(subs)))

    async def run_job(self, fn: Callable[[], T], deadline: float | None = None) -> T:
        """Run ``fn`` on the engine thread between steps (it owns the model) and await its result.

        With a ``deadline`` (``time.monotonic()``), :class:`TimedOut` is raised when it passes;
        a job still queued then is never started (one already running finishes unread)."""
        if not self.accepting:
            raise ShuttingDown("the server is shutting down")
        loop = asyncio.get_running_loop()
        job = Job(fn, loop, loop.create_future(), deadline)
        self._commands.put(RunJob(job))
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
        self._commands.put(Shutdown())
        self._thread.join(timeout=30)

    # ------------------------------------------------------------------ engine thread
    def _run(self) -> None:
        with torch.inference_mode():
            while not self._stop.is_set():
                busy = self.engine.has_work or bool(self._jobs)
                self._drain(block=not busy)
                if self._jobs:
                    self._run_job(self._jobs.pop(0))
                if self.engine.has_work:
                    self._step()
                self._update_gauges()
        self._abort_all("the server shut down")

    def _drain(self, block: bool) -> None:
        try:
            command = self._commands.get(timeout=0.5) if block else self._commands.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle(command)
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return

    def _handle(self, command: Command) -> None:
        if isinstance(command, Add):
            with self._pending_lock:
                self._pending -= len(command.subs)
            for sub in command.subs:
                self._add(sub)
        elif isinstance(command, Cancel):
            for sub in command.subs:
                known = self._subs.pop(sub.request.request_id, None) is not None
                if known and sub.request.state is not RequestState.FINISHED:
                    self.engine.cancel(sub.request)
        elif isinstance(command, RunJob):
            self._jobs.append(command.job)
        elif isinstance(command, Abort):
            self._abort_all(command.reason)
        else:
            self._stop.set()

    def _add(self, sub: Submission) -> None:
        """``Engine.add``, the engine's one way in; a request it refuses (the endpoint checked it
        with ``Engine.check`` first, so this does not happen) ends at once with a 400 naming why."""
        try:
            self.engine.add(sub.request)
        except ValueError as exc:
            sub.error, sub.error_status = str(exc), 400
            self._publish(sub, finished=True)
            return
        self._subs[sub.request.request_id] = sub

    def _run_job(self, job: Job) -> None:
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
            output = self.engine.step()
        except Exception as exc:  # fail the step's requests, keep serving the others
            log.exception("engine step failed")
            for req in self.engine.cancel_running():
                sub = self._subs.pop(req.request_id, None)
                if sub is not None:
                    sub.error, sub.error_status = f"engine error: {exc}", 500
                    self._publish(sub, finished=True)
            return
        self.metrics.generated_tokens.inc(len(output.advanced))
        batches: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue[Any], tuple[int, int, bool]]]] = {}
        for req in output.advanced:
            sub = self._subs.get(req.request_id)
            if sub is None:
                continue
            finished = req.state is RequestState.FINISHED
            if req.error is not None:  # the engine failed it (non-finite logits): a 500 naming why
                sub.error, sub.error_status = req.error, 500
            batches.setdefault(sub.loop, []).append((sub.queue, self._progress(sub, finished)))
            if finished:
                del self._subs[req.request_id]
        # one wake-up of each event loop per step, not one per request: with 64 streams the
        # per-request hand-offs cost the engine thread and the loop a measurable share of a step
        for loop, items in batches.items():
            loop.call_soon_threadsafe(_deliver, items)

    @staticmethod
    def _progress(sub: Submission, finished: bool) -> tuple[int, int, bool]:
        count = sub.request.n_generated
        sub.published = count
        return (sub.index, count, finished)

    def _publish(self, sub: Submission, finished: bool) -> None:
        sub.loop.call_soon_threadsafe(sub.queue.put_nowait, self._progress(sub, finished))

    def _update_gauges(self) -> None:
        m = self.metrics
        m.queue_depth.set(self.waiting)
        m.running.set(self.running)
        m.kv_rows_used.set(self.rows_used)
        e = self.engine
        m.kv_blocks_free.set(e.kv_blocks_free)
        m.kv_blocks_reserved.set(e.kv_blocks_reserved)
        m.preemptions.set(e.n_preemptions)
        m.kv_usage.set(1 - e.kv_blocks_free / e.kv_blocks_total if e.kv_blocks_total else 0.0)
        queried, hits = e.prefix_cache_blocks
        m.prefix_queried.set(queried)
        m.prefix_hits.set(hits)
        m.prefix_hit_rate.set(hits / queried if queried else 0.0)

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


def _deliver(items: list[tuple[asyncio.Queue[Any], tuple[int, int, bool]]]) -> None:
    """Put one step's progress on its requests' queues (runs on their event loop)."""
    for target, item in items:
        target.put_nowait(item)


async def next_progress(
    queue: asyncio.Queue[tuple[int, int, bool]], deadline: float, watcher: asyncio.Future[Any] | None
) -> tuple[int, int, bool] | None:
    """The next ``(index, n_tokens, finished)`` an HTTP request's queue receives, or None when
    ``deadline`` (``time.monotonic()``) passes first; raises ``ConnectionResetError`` when
    ``watcher`` (the client's disconnect) completes first. Events already queued (a step's
    arrive together) are read without a task or a wait."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:  # checked first: a busy queue always has an event ready
        return None
    if watcher is not None and watcher.done():
        raise ConnectionResetError("client disconnected")
    if not queue.empty():
        return queue.get_nowait()
    getter = asyncio.ensure_future(queue.get())
    waits: set[asyncio.Future[Any]] = {getter} | ({watcher} if watcher is not None else set())
    done, _ = await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
    if getter in done:
        return getter.result()
    getter.cancel()
    if watcher is not None and watcher in done:
        raise ConnectionResetError("client disconnected")
    return None


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
