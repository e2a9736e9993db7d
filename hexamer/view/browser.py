"""Open a page in headless Chromium and read what it saw: whether igv.js drew, its tracks, the
console errors and any request that left the machine (the status the pages' probe writes into
the DOM). Used by the browser tests and ``hexamer bench report``; needs Debian's ``chromium``.

Networking is cut for everything but 127.0.0.1 (``--host-resolver-rules``), so a page that
needed a CDN fails here the way it would offline.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PageStatus", "find_chromium", "open_page"]

_STATUS = re.compile(r'<pre id="hexamer-status">([^<]*)</pre>')


@dataclass
class PageStatus:
    """What the page's probe recorded; ``seconds``: the whole browser run, start to exit."""

    ready: bool
    tracks: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)
    ms: float | None = None
    seconds: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)


def find_chromium() -> str | None:
    """The Chromium binary on PATH (``chromium``, ``chromium-browser``), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _command(binary: str, profile: str, budget_ms: int, size: tuple[int, int]) -> list[str]:
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        f"--virtual-time-budget={budget_ms}",
        f"--window-size={size[0]},{size[1]}",
    ]


def open_page(
    url: str,
    *,
    screenshot: str | os.PathLike[str] | None = None,
    budget_ms: int = 20_000,
    size: tuple[int, int] = (1200, 800),
    timeout_s: float = 120.0,
) -> PageStatus:
    """Load ``url`` for its DOM (the probe's status) and, when given, a ``screenshot`` (PNG). ``RuntimeError`` when no Chromium is installed or it fails."""
    binary = find_chromium()
    if binary is None:
        raise RuntimeError("no chromium on PATH: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="hexamer-chromium-") as profile:
        cmd = _command(binary, profile, budget_ms, size)
        if screenshot is not None:
            cmd.append(f"--screenshot={Path(screenshot).resolve()}")
        start = time.perf_counter()
        done = subprocess.run([*cmd, "--dump-dom", url], capture_output=True, text=True, timeout=timeout_s)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-500:]}")
    found = _STATUS.search(done.stdout)
    raw = json.loads(html.unescape(found[1])) if found and found[1] else {}
    return PageStatus(
        ready=bool(raw.get("ready")),
        tracks=list(raw.get("tracks", [])),
        errors=list(raw.get("errors", [])),
        offsite=list(raw.get("offsite", [])),
        ms=raw.get("ms"),
        seconds=seconds,
        raw=raw,
    )
