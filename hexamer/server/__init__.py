"""hexamer's HTTP server: OpenAI-compatible completions and embeddings plus DNA-native endpoints,
on the engine's continuous batching (``hexamer serve``; see docs/server.md).

Imports are lazy so that ``hexamer --help`` does not load FastAPI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServerSettings", "create_app", "run_server"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from hexamer.server.app import create_app

        return create_app
    if name == "run_server":
        from hexamer.server.run import run_server

        return run_server
    if name == "ServerSettings":
        from hexamer.server.settings import ServerSettings

        return ServerSettings
    raise AttributeError(name)
