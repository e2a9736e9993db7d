"""hexamer: fast, complete, remote-code-free toolkit for Carbon and other 6-mer DNA language models."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hexamer.lazy import lazy_getattr

__version__ = "0.1.0.dev0"

# Public names are imported lazily so `import hexamer` stays cheap (no torch import for the tokenizer).
_LAZY = {
    "Carbon": "hexamer.carbon",
    "EngineConfig": "hexamer.engine.config",
    "Generation": "hexamer.backend.results",
    "ScoreResult": "hexamer.backend.results",
    "UnscoredSequenceWarning": "hexamer.backend.results",
    "CarbonTokenizer": "hexamer.tokenizer",
    "DnaLayout": "hexamer.tokenizer",
}

if TYPE_CHECKING:
    from hexamer.backend.results import Generation, ScoreResult, UnscoredSequenceWarning
    from hexamer.carbon import Carbon
    from hexamer.engine.config import EngineConfig
    from hexamer.tokenizer import CarbonTokenizer, DnaLayout

__all__ = [
    "Carbon",
    "CarbonTokenizer",
    "DnaLayout",
    "EngineConfig",
    "Generation",
    "ScoreResult",
    "UnscoredSequenceWarning",
    "__version__",
]


__getattr__ = lazy_getattr("hexamer", _LAZY)
