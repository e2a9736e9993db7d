"""Run the app under uvicorn with the connection limits and the shutdown ``hexamer serve`` promises.

- a connection must send a request's headers within ``header_timeout_s`` of opening (or of its
  previous response): a slow-header client (slowloris) is closed, with 408 if it sent anything;
- at most ``max_connections`` connections are open: one more is answered 503 and closed;
- idle keep-alive connections close after ``keep_alive_s`` (the body deadline is
  :class:`~hexamer.server.app.GuardMiddleware`'s);
- on SIGTERM / Ctrl-C the server **drains**: it keeps listening, ``/health`` says
  ``shutting_down`` (503) so a load balancer stops routing to it, new work gets 503 with
  ``Retry-After``, in-flight requests get ``shutdown_grace_s`` to finish; then whatever still runs
  is cancelled (a stream ends with an error event) and the process exits. A second signal exits
  at once.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from types import FrameType
from typing import Any

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from hexamer.server.state import ServerState
from hexamer.server.streaming import pin_mmap_threshold

log = logging.getLogger("hexamer.server")

_TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_BUSY_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)


def _guarded_protocol(header_timeout_s: float, max_connections: int) -> type[H11Protocol]:
    class GuardedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol plus a header deadline and a cap on open connections."""

        _header_timer: asyncio.TimerHandle | None = None
        _received = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                body = (
                    b'{"error": {"message": "too many open connections", "type": "ServiceUnavailableError",'
                    b' "param": null, "code": 503}}'
                )
                transport.write(_BUSY_503 % (len(body), body))
                transport.close()
                return
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            self._received = True
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the headers of a request are complete
                self._disarm_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.DONE):
                self._received = False
                self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_header_timer()
            super().connection_lost(exc)

        def _arm_header_timer(self) -> None:
            self._disarm_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _disarm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timeout(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state not in (h11.IDLE, h11.DONE):
                return
            if self.cycle is not None and not self.cycle.response_complete:
                return  # a response is still being written (pipelined request waits for it)
            if self._received:
                self.transport.write(_TIMEOUT_408)
            self.transport.close()

    return GuardedH11Protocol


class HexamerServer(uvicorn.Server):
    """uvicorn's server with a draining first signal (see the module docstring)."""

    def __init__(self, config: uvicorn.Config, state: ServerState, *, signals: bool = True) -> None:
        super().__init__(config)
        self.state = state
        self.signals = signals
        self.draining = False

    def install_signal_handlers(self) -> None:
        if self.signals:
            super().install_signal_handlers()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.draining:  # second signal: end everything in flight now, then exit
            self.state.worker.abort("the server shut down before this request finished")
            super().handle_exit(sig, frame)
            return
        self.drain()

    def drain(self) -> None:
        """Stop taking work, give in-flight requests ``shutdown_grace_s``, then exit."""
        if self.draining:
            return
        self.draining = True
        self.state.worker.accepting = False
        log.info('{"event": "draining"}')
        threading.Thread(target=self._finish_drain, name="hexamer-drain", daemon=True).start()

    def _finish_drain(self) -> None:
        worker = self.state.worker
        deadline = time.monotonic() + self.state.settings.shutdown_grace_s
        while worker.busy and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.abort("the server shut down before this request finished")
        self.should_exit = True


def uvicorn_config(app: FastAPI, **options: Any) -> uvicorn.Config:
    """uvicorn settings from the app's :class:`ServerSettings` (plus host, port, log level...)."""
    s = app.state.hexamer.settings
    return uvicorn.Config(
        app,
        http=_guarded_protocol(s.header_timeout_s, s.max_connections),
        timeout_keep_alive=s.keep_alive_s,
        timeout_graceful_shutdown=int(s.shutdown_grace_s) + 5,
        lifespan="on",
        **options,
    )


def run_server(app: FastAPI, *, host: str, port: int, log_level: str = "info") -> None:
    """Serve ``app`` (from :func:`~hexamer.server.app.create_app`) until SIGTERM / Ctrl-C."""
    config = uvicorn_config(app, host=host, port=port, log_level=log_level)
    # what exists now (model, tokenizer, app) lives as long as the process: kept out of the
    # collector's full passes, which would otherwise walk it all (0.1-0.5 s, every thread stalled)
    gc.collect()
    gc.freeze()
    pin_mmap_threshold()  # large buffers go back to the system when freed (RSS near rest)
    HexamerServer(config, app.state.hexamer).run()
