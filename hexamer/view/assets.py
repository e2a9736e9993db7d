"""The files the pages are made of, shipped in ``hexamer/data``: igv.js (``data/igv``, pinned,
with its licence and provenance) and the page templates and status probe (``data/view``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

__all__ = ["IGV_JS", "IGV_VERSION", "fill", "igv_js_path", "template"]

IGV_JS = "igv.min.js"
#: the igv.js release shipped (hexamer/data/igv/PROVENANCE)
IGV_VERSION = "3.8.10"


def igv_js_path() -> Path:
    """The shipped ``igv.min.js``."""
    return Path(str(resources.files("hexamer").joinpath("data", "igv", IGV_JS)))


def template(name: str) -> str:
    """A file of ``hexamer/data/view`` (the page templates and the status probe) as text."""
    return resources.files("hexamer").joinpath("data", "view", name).read_text(encoding="utf-8")


def fill(text: str, values: Mapping[str, str]) -> str:
    """``@@NAME@@`` placeholders replaced in one pass (a value that itself holds ``@@X@@`` stays as
    it is); ``KeyError`` for a placeholder without a value."""
    return re.sub(r"@@([A-Z]+)@@", lambda m: values[m[1]], text)
