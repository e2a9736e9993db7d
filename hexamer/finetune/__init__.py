"""Supervised fine-tuning of Carbon models: regression and classification heads.

* :mod:`~hexamer.finetune.task`: `TaskSpec` (kind, outputs) and `LabelledSet` (rows to train on).
"""

from hexamer.finetune.task import TASK_KINDS, LabelledSet, TaskKind, TaskSpec

__all__ = [
    "TASK_KINDS",
    "LabelledSet",
    "TaskKind",
    "TaskSpec",
]
