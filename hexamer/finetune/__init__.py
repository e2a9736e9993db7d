"""Supervised fine-tuning of Carbon models: regression and classification heads.

* :mod:`~hexamer.finetune.task`: `TaskSpec` (kind, outputs) and `LabelledSet` (rows to train on);
* :mod:`~hexamer.finetune.head`: `SequenceClassifier`, a score head on hexamer's Llama;
* :mod:`~hexamer.finetune.folders`: head folders in ``transformers``' layout (save / load);
* :mod:`~hexamer.finetune.lora`: LoRA adapters (``peft``'s maths and files), merged on export.

Import cost: the head modules pull in torch; ``hexamer.finetune.task`` alone does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hexamer.finetune.task import TASK_KINDS, LabelledSet, TaskKind, TaskSpec
from hexamer.lazy import lazy_getattr

if TYPE_CHECKING:
    from hexamer.finetune.folders import is_head_folder, load_classifier, new_classifier, save_classifier
    from hexamer.finetune.head import POOLINGS, HeadSettings, SequenceClassifier
    from hexamer.finetune.lora import (
        LORA_TARGETS,
        LoraOptions,
        add_lora,
        load_adapter,
        merge_lora,
        save_adapter,
    )

_LAZY = {
    "POOLINGS": "hexamer.finetune.head",
    "HeadSettings": "hexamer.finetune.head",
    "SequenceClassifier": "hexamer.finetune.head",
    "is_head_folder": "hexamer.finetune.folders",
    "load_classifier": "hexamer.finetune.folders",
    "new_classifier": "hexamer.finetune.folders",
    "save_classifier": "hexamer.finetune.folders",
    "LORA_TARGETS": "hexamer.finetune.lora",
    "LoraOptions": "hexamer.finetune.lora",
    "add_lora": "hexamer.finetune.lora",
    "load_adapter": "hexamer.finetune.lora",
    "merge_lora": "hexamer.finetune.lora",
    "save_adapter": "hexamer.finetune.lora",
}

__all__ = [
    "LORA_TARGETS",
    "POOLINGS",
    "TASK_KINDS",
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
