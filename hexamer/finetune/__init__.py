"""Supervised fine-tuning of Carbon models: regression and classification heads.

* :mod:`~hexamer.finetune.task`: `TaskSpec` (kind, outputs) and `LabelledSet` (rows to train on);
* :mod:`~hexamer.finetune.options`: `FitOptions` and `LoraOptions`, range-checked (torch-free);
* :mod:`~hexamer.finetune.head`: `SequenceClassifier`, a score head on hexamer's Llama;
* :mod:`~hexamer.finetune.folders`: head folders in ``transformers``' layout (save / load);
* :mod:`~hexamer.finetune.lora`: LoRA adapters (``peft``'s maths and files), merged on export;
* :mod:`~hexamer.finetune.fit`: ``fit`` (full / lora / probe), its losses
  (:mod:`~hexamer.finetune.losses`), loop (:mod:`~hexamer.finetune.fit_loop`) and resumable
  checkpoints (:mod:`~hexamer.finetune.state`);
* :mod:`~hexamer.finetune.predict`: ``predict`` (optionally averaged over both strands).

``fit`` and ``predict`` are imported from their modules (a package attribute named like a
submodule would be replaced by the submodule once it is imported)::

    from hexamer.finetune import FitOptions
    from hexamer.finetune.fit import fit
    from hexamer.finetune.predict import predict
    result = fit("Carbon-500M", train, valid, task, FitOptions(method="lora"), "runs/mpra")
    values = predict(result.best_folder, sequences, rc_average=True)

Import cost: ``task`` and ``options`` are torch-free; the other names load torch on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hexamer.finetune.options import (
    LORA_TARGETS,
    LOSSES,
    METHODS,
    POOLINGS,
    SCHEDULES,
    FitOptions,
    LoraOptions,
)
from hexamer.finetune.task import TASK_KINDS, LabelledSet, TaskKind, TaskSpec
from hexamer.lazy import lazy_getattr

if TYPE_CHECKING:
    from hexamer.finetune.fit import FitProgress, FitResult
    from hexamer.finetune.folders import is_head_folder, load_classifier, new_classifier, save_classifier
    from hexamer.finetune.head import HeadSettings, SequenceClassifier
    from hexamer.finetune.lora import add_lora, load_adapter, merge_lora, save_adapter

_LAZY = {
    "FitProgress": "hexamer.finetune.fit",
    "FitResult": "hexamer.finetune.fit",
    "HeadSettings": "hexamer.finetune.head",
    "SequenceClassifier": "hexamer.finetune.head",
    "is_head_folder": "hexamer.finetune.folders",
    "load_classifier": "hexamer.finetune.folders",
    "new_classifier": "hexamer.finetune.folders",
    "save_classifier": "hexamer.finetune.folders",
    "add_lora": "hexamer.finetune.lora",
    "load_adapter": "hexamer.finetune.lora",
    "merge_lora": "hexamer.finetune.lora",
    "save_adapter": "hexamer.finetune.lora",
}

__all__ = [
    "LORA_TARGETS",
    "LOSSES",
    "METHODS",
    "POOLINGS",
    "SCHEDULES",
    "TASK_KINDS",
    "FitOptions",
    "FitProgress",
    "FitResult",
    "HeadSettings",
    "LabelledSet",
    "LoraOptions",
    "SequenceClassifier",
    "TaskKind",
    "TaskSpec",
    "add_lora",
    "is_head_folder",
    "load_adapter",
    "load_classifier",
    "merge_lora",
    "new_classifier",
    "save_adapter",
    "save_classifier",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
