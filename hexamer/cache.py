"""Where hexamer keeps what it builds once: models for the demo and benches, the llama.cpp build,
evaluation caches, the compiled CPU kernel."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$HEXAMER_CACHE``, else ``$XDG_CACHE_HOME/hexamer``, else ``~/.cache/hexamer``."""
    base = os.environ.get("HEXAMER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "hexamer"
    )
    return Path(base)
