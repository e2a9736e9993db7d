"""Run the real server (uvicorn) on a free loopback port in a background thread, for tests.

from hexamer.server.testing import serve_in_thread
with serve_in_thread(tiny_folder, max_num_seqs=8) as url:      # "http://127.0.0.1:PORT"
    httpx.post(f"{url}/v1/completions", json={...})
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

from hexamer.carbon import Carbon
from hexamer.server.app import create_app


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # a background thread cannot own signals
        pass


@contextmanager
def serve_app_in_thread(app: FastAPI, *, start_timeout: float = 60.0) -> Iterator[str]:
    """Serve an app made by :func:`~hexamer.server.app.create_app`; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    server = _Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="hexamer-uvicorn", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server thread died while starting (see the log above)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"the server did not start within {start_timeout:g} s")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


@contextmanager
def serve_in_thread(model: str | os.PathLike[str] | Carbon, **settings: Any) -> Iterator[str]:
    """Start the real server for ``model`` (a folder or a loaded :class:`Carbon`) on
    ``127.0.0.1:<free port>`` with :class:`~hexamer.server.settings.ServerSettings` options;
    yields ``"http://127.0.0.1:PORT"`` and shuts the server down cleanly on exit."""
    with serve_app_in_thread(create_app(model, **settings)) as url:
        yield url
