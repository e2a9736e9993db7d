"""Where the shipped demo model and its DNA files are (inside the installed package; read-only)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["demo_data_files", "demo_model_path"]

_MODEL_DIR = "data/demo-model"
_DNA_DIR = "data/dna"


def demo_model_path() -> Path:
    """Folder of the shipped demo model (inside the installed package; read-only)."""
    path = Path(str(resources.files("hexamer").joinpath(_MODEL_DIR)))
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"the demo model is missing from this installation (expected {path})")
    return path


def demo_data_files() -> list[Path]:
    """The shipped DNA files the demo model was trained on (sorted by name)."""
    root = Path(str(resources.files("hexamer").joinpath(_DNA_DIR)))
    return sorted(root.glob("*.fa.gz"))
