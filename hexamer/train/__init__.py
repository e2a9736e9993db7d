"""Training and fine-tuning of Carbon-format models with token CE and FNS (``hexamer train``).

* :mod:`~hexamer.train.config`: :class:`TrainConfig`, every option (CLI and JSON);
* :mod:`~hexamer.train.data`: sequence files -> held-out split -> random windows -> labels;
* :mod:`~hexamer.train.init`: a new Carbon-layout model, or a folder to fine-tune;
* :mod:`~hexamer.train.schedule`: AdamW, warm-up + cosine / WSD, the CE -> FNS switch;
* :mod:`~hexamer.train.objective`: the per-batch loss and per-base accuracy;
* :mod:`~hexamer.train.evaluate`: held-out accuracy of a model and of Markov baselines;
* :mod:`~hexamer.train.checkpoint`: atomic safetensors checkpoints loadable everywhere;
* :mod:`~hexamer.train.trainer`: :func:`train`.

Recipe and the differences from the public Carbon trainer: ``docs/training.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hexamer.lazy import lazy_getattr

# Imported lazily: `hexamer.train.config` (all the CLI needs to build its options) stays torch-free.
_LAZY = {
    "TrainConfig": "hexamer.train.config",
    "Corpus": "hexamer.train.data",
    "Segment": "hexamer.train.data",
    "build_example": "hexamer.train.data",
    "collate": "hexamer.train.data",
    "load_corpus": "hexamer.train.data",
    "EvalResult": "hexamer.train.evaluate",
    "composition_accuracy": "hexamer.train.evaluate",
    "evaluate_folder": "hexamer.train.evaluate",
    "evaluate_model": "hexamer.train.evaluate",
    "markov_accuracy": "hexamer.train.evaluate",
    "new_model_config": "hexamer.train.init",
    "starting_point": "hexamer.train.init",
    "build_optimizer": "hexamer.train.schedule",
    "fns_weight_at": "hexamer.train.schedule",
    "lr_at": "hexamer.train.schedule",
    "lr_factor": "hexamer.train.schedule",
    "TrainResult": "hexamer.train.trainer",
    "train": "hexamer.train.trainer",
}

if TYPE_CHECKING:
    from hexamer.train.config import TrainConfig
    from hexamer.train.data import Corpus, Segment, build_example, collate, load_corpus
    from hexamer.train.evaluate import (
        EvalResult,
        composition_accuracy,
        evaluate_folder,
        evaluate_model,
        markov_accuracy,
    )
    from hexamer.train.init import new_model_config, starting_point
    from hexamer.train.schedule import build_optimizer, fns_weight_at, lr_at, lr_factor
    from hexamer.train.trainer import TrainResult, train

__all__ = [
    "Corpus",
    "EvalResult",
    "Segment",
    "TrainConfig",
    "TrainResult",
    "build_example",
    "build_optimizer",
    "collate",
    "composition_accuracy",
    "evaluate_folder",
    "evaluate_model",
    "fns_weight_at",
    "load_corpus",
    "lr_at",
    "lr_factor",
    "markov_accuracy",
    "new_model_config",
    "starting_point",
    "train",
]


__getattr__ = lazy_getattr("hexamer.train", _LAZY)
