"""The model a command or bench uses when it is given none: the shipped demo model (trained on
real DNA) when installed, else a tiny random-weight Carbon folder built once into the cache."""

from __future__ import annotations

from pathlib import Path

from hexamer import __version__
from hexamer.cache import cache_root

__all__ = ["builtin_tiny_model", "default_model"]


def builtin_tiny_model() -> Path:
    """A tiny random-weight Carbon-format folder, built once into the cache (atomically)."""
    from hexamer.synthetic import build_carbon_folder_once

    return build_carbon_folder_once(cache_root() / f"tiny-random-{__version__}")


def default_model() -> tuple[Path, bool]:
    """The shipped demo model (trained on real DNA), else the tiny random test model; and whether
    it is the trained one."""
    try:
        from hexamer.demo import demo_model_path

        return demo_model_path(), True
    except (ImportError, FileNotFoundError):
        return builtin_tiny_model(), False
