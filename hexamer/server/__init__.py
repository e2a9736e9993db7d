"""hexamer's HTTP server: OpenAI-compatible completions and embeddings plus DNA-native endpoints,
on the engine's continuous batching (``hexamer serve``; see docs/server.md).

Imports are lazy so that ``hexamer --help`` does not load FastAPI.
"""

from __future__ import annotations

from hexamer.lazy import lazy_getattr

__all__ = ["ServerSettings", "create_app", "run_server"]


__getattr__ = lazy_getattr(
    "hexamer.server",
    {
        "create_app": "hexamer.server.app",
        "run_server": "hexamer.server.run",
        "ServerSettings": "hexamer.server.settings",
    },
)
