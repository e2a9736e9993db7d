"""The built-in demo model: a small Carbon-format model trained on real DNA, shipped with hexamer.

It exists so that ``hexamer demo``/``generate``/``score`` and the examples produce DNA-like output
without a download: 4.3 M parameters (8.7 MB in float16), trained for about 19 CPU-minutes with
``hexamer train`` on the sequences in ``hexamer/data/dna`` (provenance, commands and held-out
accuracy beside Markov baselines: ``hexamer/data/demo-model/README.md``). It is not Carbon and says
nothing about Carbon's quality. :func:`run_demo` (``hexamer demo``) is the guided tour.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["DemoResult", "demo_data_files", "demo_model_path", "run_demo"]

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


def __getattr__(name: str) -> object:
    """``run_demo``/``DemoResult`` load torch and the model code: import them only when asked."""
    if name in ("run_demo", "DemoResult"):
        from hexamer.demo import story

        return getattr(story, name)
    raise AttributeError(f"module 'hexamer.demo' has no attribute {name!r}")
