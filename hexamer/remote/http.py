"""HTTP plumbing for talking to an inference server: bounded concurrency, retries, clear errors.

One :class:`Connection` owns an ``httpx.AsyncClient`` that lives on a private event loop in a
daemon thread, so the synchronous ``Carbon``-like API works from plain scripts *and* from code
that already runs an event loop (Jupyter), and connections are reused between calls.

* At most ``max_in_flight`` requests are on the wire at once (an ``asyncio.Semaphore``); a
  :class:`TokenGate` bounds the prompt tokens of a batch in flight (``token_budget``).
* 429, 502, 503, 504 and connection errors are retried with exponential backoff (honouring
  ``Retry-After``); other HTTP errors fail at once with the URL, the status and the server's own
  message.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import random
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable
from typing import Any, TypeVar

import httpx

from hexamer.remote.errors import MalformedResponse, RemoteError

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 502, 503, 504})
_RETRY_ERRORS = (httpx.TransportError,)  # connect/read errors and timeouts


def server_message(response: httpx.Response) -> str:
    """The error text a vLLM / SGLang / FastAPI server put in its body (or the raw body, cut)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict):
        for key in ("message", "detail", "error"):
            value = body.get(key)
            if isinstance(value, dict):
                value = value.get("message", value)
            if value:
                return str(value)[:500]
    return json.dumps(body)[:500]


def _hint(status: int, message: str) -> str:
    low = message.lower()
    if status in (401, 403):
        return " (check the API key: pass api_key=... / --api-key)"
    if "logprob" in low and ("max" in low or "greater" in low or "exceed" in low):
        return " (start vLLM with --max-logprobs 4096, or ask for fewer with top_n=...)"
    if status == 404:
        return " (wrong URL or backend? try backend='vllm' or backend='sglang')"
    return ""


class TokenGate:
    """At most ``budget`` prompt tokens in flight at once, as ``token_budget`` bounds the padded
    tokens of one local forward (a request longer than the budget goes alone). Create and use it
    on one event loop: ``async with gate.hold(n_tokens): ...``."""

    def __init__(self, budget: int) -> None:
        if budget < 1:
            raise ValueError(f"token budget must be >= 1, got {budget}")
        self.budget = budget
        self.used = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, n_tokens: int) -> AsyncIterator[None]:
        n = min(n_tokens, self.budget)
        async with self._changed:
            await self._changed.wait_for(lambda: self.used + n <= self.budget)
            self.used += n
        try:
            yield
        finally:
            async with self._changed:
                self.used -= n
                self._changed.notify_all()


class Connection:
    """A server base URL plus everything needed to call it robustly."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_in_flight: int = 16,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"server URL must start with http:// or https://, got {base_url!r}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.api_key = api_key
        self.timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self.max_in_flight = max_in_flight
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ event loop
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="hexamer-remote", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the connection's loop and wait for its result (from any thread)."""
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def run_all(
        self,
        coros: Iterable[Coroutine[Any, Any, T]],
        on_done: Callable[[int, T], None] | None = None,
    ) -> list[T]:
        """Run coroutines concurrently (the in-flight bound applies to their HTTP requests); results
        in input order. ``on_done(index, result)`` is called in the caller's thread as each one
        finishes. The first failure cancels the rest and is raised."""
        loop = self._ensure_loop()
        futures = [asyncio.run_coroutine_threadsafe(c, loop) for c in coros]
        index = {f: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * len(futures)
        try:
            for future in concurrent.futures.as_completed(futures):
                i = index[future]
                results[i] = future.result()
                if on_done is not None:
                    on_done(i, results[i])
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results

    def close(self) -> None:
        """Close the HTTP client and stop the loop thread."""
        if self._loop is None:
            return
        if self._client is not None:
            self.run(self._client.aclose())
            self._client = None
        self.run(self._finish_generators())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._loop.close()
        self._loop = self._thread = None
        self._slots = None

    async def _finish_generators(self) -> None:
        """Let the closing of abandoned stream readers (httpx's inner generators) run before the
        loop stops, so none is destroyed pending."""
        for _ in range(3):
            await asyncio.sleep(0)
        assert self._loop is not None
        await self._loop.shutdown_asyncgens()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _ensure_client(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        if self._client is None:
            limits = httpx.Limits(
                max_connections=self.max_in_flight + 4, max_keepalive_connections=self.max_in_flight
            )
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits, headers=self._headers())
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_in_flight)
        return self._client, self._slots

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    # ------------------------------------------------------------------ requests
    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            after = response.headers.get("retry-after")
            if after:
                try:
                    return min(float(after), self.max_backoff)
                except ValueError:
                    pass
        base = min(self.backoff * 2**attempt, self.max_backoff)
        return base * (0.5 + random.random() / 2)

    async def _send(self, method: str, path: str, body: Any | None, stream: bool) -> httpx.Response:
        client, _ = self._ensure_client()
        url = self.url(path)
        attempt = 0
        while True:
            response = None
            try:
                request = client.build_request(method, url, json=body)
                response = await client.send(request, stream=stream)
            except _RETRY_ERRORS as exc:
                if attempt >= self.max_retries:
                    raise RemoteError(
                        f"{method} {url} failed after {attempt + 1} attempts: {type(exc).__name__}: {exc or 'no detail'}"
                        " (is the server running and reachable?)",
                        url=url,
                    ) from exc
            else:
                if response.status_code < 400:
                    return response
                if stream:
                    await response.aread()
                if response.status_code not in RETRY_STATUSES or attempt >= self.max_retries:
                    message = server_message(response)
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise RemoteError(
                        f"{method} {url} returned HTTP {response.status_code}{tries}: {message}"
                        f"{_hint(response.status_code, message)}",
                        url=url,
                        status=response.status_code,
                    )
            await asyncio.sleep(self._delay(attempt, response))
            attempt += 1

    async def request_json(self, method: str, path: str, body: Any | None = None) -> Any:
        """One JSON request (retried as documented); returns the decoded body."""
        _, slots = self._ensure_client()
        async with slots:
            response = await self._send(method, path, body, stream=False)
        try:
            return response.json()
        except ValueError as exc:
            raise MalformedResponse(
                f"{method} {self.url(path)} returned HTTP {response.status_code} but not JSON: "
                f"{response.text[:200]!r}",
                url=self.url(path),
                status=response.status_code,
            ) from exc

    async def post(self, path: str, body: Any) -> Any:
        return await self.request_json("POST", path, body)

    async def get(self, path: str) -> Any:
        return await self.request_json("GET", path)

    async def stream_events(self, path: str, body: Any) -> AsyncIterator[Any]:
        """POST with ``stream: true`` and yield each server-sent event's decoded JSON (until
        ``[DONE]``). Holds one in-flight slot for the whole stream."""
        _, slots = self._ensure_client()
        url = self.url(path)
        async with slots:
            response = await self._send("POST", path, body, stream=True)
            try:
                lines = contextlib.aclosing(response.aiter_lines())
                async with lines as stream:
                    async for line in stream:
                        line = line.strip()
                        if not line.startswith("data:"):
                            continue
                        data = line[len("data:") :].strip()
                        if data == "[DONE]":
                            break
                        try:
                            yield json.loads(data)
                        except ValueError as exc:
                            raise MalformedResponse(
                                f"POST {url} streamed an event that is not JSON: {data[:200]!r}", url=url
                            ) from exc
            finally:
                await response.aclose()
