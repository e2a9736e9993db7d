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

from fastapi import FastAPI

from hexamer.carbon import Carbon
from hexamer.server.app import create_app
from hexamer.server.run import HexamerServer, uvicorn_config


@contextmanager
def serve_app_in_thread(app: FastAPI, *, start_timeout: float = 60.0) -> Iterator[str]:
    """Serve an app made by :func:`~hexamer.server.app.create_app`; yields its base URL."""
    with running_server(app, start_timeout=start_timeout) as (url, _):
        yield url


@contextmanager
def running_server(app: FastAPI, *, start_timeout: float = 60.0) -> Iterator[tuple[str, HexamerServer]]:
    """Like :func:`serve_app_in_thread`, also yielding the server (``server.drain()`` does what
    SIGTERM does to ``hexamer serve``). The same protocol, limits and drain as the command."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn_config(app, log_level="warning")
    server = HexamerServer(config, app.state.hexamer, signals=False)  # a thread cannot own signals
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
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        sock.close()


@contextmanager
def serve_in_thread(
    model: str | os.PathLike[str] | Carbon,
    *,
    draft: str | os.PathLike[str] | Carbon | None = None,
    **settings: Any,
) -> Iterator[str]:
    """Start the real server for ``model`` (a folder or a loaded :class:`Carbon`; ``draft``: a draft
    model for speculative generation) on ``127.0.0.1:<free port>`` with
    :class:`~hexamer.server.settings.ServerSettings` options; yields ``"http://127.0.0.1:PORT"`` and
    shuts the server down cleanly on exit."""
    with serve_app_in_thread(create_app(model, draft=draft, **settings)) as url:
        yield url
