"""Supervised fine-tuning of Carbon models: regression and classification heads.

* :mod:`~hexamer.finetune.task`: `TaskSpec` (kind, outputs) and `LabelledSet` (rows to train on);
* :mod:`~hexamer.finetune.head`: `SequenceClassifier`, a score head on hexamer's Llama;
* :mod:`~hexamer.finetune.folders`: head folders in ``transformers``' layout (save / load);
* :mod:`~hexamer.finetune.lora`: LoRA adapters (``peft``'s maths and files), merged on export;
* :mod:`~hexamer.finetune.data` (with :mod:`~hexamer.finetune.inputs`, :mod:`~hexamer.finetune.labels`):
  labelled tables, FASTA + labels, BED + reference, checked before any training;
* :mod:`~hexamer.finetune.splits`: chromosome, column, random and k-fold splits;
* :mod:`~hexamer.finetune.transform`: label z-scoring fitted on train, high-activity duplication;
* :mod:`~hexamer.finetune.metrics`: regression and classification metrics, the selection metric;
* :mod:`~hexamer.finetune.baseline`: the k-mer ridge / logistic baseline;
* :mod:`~hexamer.finetune.report`: metrics.json, prediction tables, figures;
* :mod:`~hexamer.finetune.fit`: `fit` (full / lora / probe) with `FitOptions`
  (:mod:`~hexamer.finetune.options`), its losses (:mod:`~hexamer.finetune.losses`), loop
  (:mod:`~hexamer.finetune.fit_loop`) and resumable checkpoints (:mod:`~hexamer.finetune.state`);
* :mod:`~hexamer.finetune.predict`: `predict` (optionally averaged over both strands).

    from hexamer.finetune import FitOptions, fit, predict
    result = fit("Carbon-500M", train, valid, task, FitOptions(method="lora"), "runs/mpra")
    values = predict(result.best_folder, sequences, rc_average=True)

Import cost: the head modules pull in torch; ``hexamer.finetune.task`` alone does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hexamer.finetune.task import TASK_KINDS, LabelledSet, TaskKind, TaskSpec
from hexamer.lazy import lazy_getattr

if TYPE_CHECKING:
    from hexamer.finetune.baseline import BaselineResult, run_baseline
    from hexamer.finetune.data import (
        ReadOptions,
        ReadResult,
        check_lengths,
        load_bed,
        load_fasta,
        load_table,
        normalize_dna,
    )
    from hexamer.finetune.fit import FitProgress, FitResult, fit
    from hexamer.finetune.folders import is_head_folder, load_classifier, new_classifier, save_classifier
    from hexamer.finetune.head import POOLINGS, HeadSettings, SequenceClassifier
    from hexamer.finetune.inputs import DataError
    from hexamer.finetune.lora import (
        LORA_TARGETS,
        LoraOptions,
        add_lora,
        load_adapter,
        merge_lora,
        save_adapter,
    )
    from hexamer.finetune.metrics import evaluate, metric_for
    from hexamer.finetune.splits import (
        Split,
        SplitError,
        fold_summary,
        kfold_splits,
        split_by_chromosome,
        split_by_column,
        split_random,
    )
    from hexamer.finetune.transform import LabelTransform, duplicate_high_activity

_LAZY = {
    "BaselineResult": "hexamer.finetune.baseline",
    "run_baseline": "hexamer.finetune.baseline",
    "ReadOptions": "hexamer.finetune.data",
    "ReadResult": "hexamer.finetune.data",
    "check_lengths": "hexamer.finetune.data",
    "load_bed": "hexamer.finetune.data",
    "load_fasta": "hexamer.finetune.data",
    "load_table": "hexamer.finetune.data",
    "normalize_dna": "hexamer.finetune.data",
    "DataError": "hexamer.finetune.inputs",
    "evaluate": "hexamer.finetune.metrics",
    "metric_for": "hexamer.finetune.metrics",
    "Split": "hexamer.finetune.splits",
    "SplitError": "hexamer.finetune.splits",
    "fold_summary": "hexamer.finetune.splits",
    "kfold_splits": "hexamer.finetune.splits",
    "split_by_chromosome": "hexamer.finetune.splits",
    "split_by_column": "hexamer.finetune.splits",
    "split_random": "hexamer.finetune.splits",
    "LabelTransform": "hexamer.finetune.transform",
    "duplicate_high_activity": "hexamer.finetune.transform",
    "FitProgress": "hexamer.finetune.fit",
    "FitResult": "hexamer.finetune.fit",
    "fit": "hexamer.finetune.fit",
    "LOSSES": "hexamer.finetune.losses",
    "METHODS": "hexamer.finetune.options",
    "FitOptions": "hexamer.finetune.options",
    "predict": "hexamer.finetune.predict",
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
    "LOSSES",
    "METHODS",
    "POOLINGS",
    "TASK_KINDS",
    "BaselineResult",
    "DataError",
    "FitOptions",
    "FitProgress",
    "FitResult",
    "HeadSettings",
    "LabelTransform",
    "LabelledSet",
    "LoraOptions",
    "ReadOptions",
    "ReadResult",
    "SequenceClassifier",
    "Split",
    "SplitError",
    "TaskKind",
    "TaskSpec",
    "add_lora",
    "check_lengths",
    "duplicate_high_activity",
    "evaluate",
    "fit",
    "fold_summary",
    "is_head_folder",
    "kfold_splits",
    "load_adapter",
    "load_bed",
    "load_classifier",
    "load_fasta",
    "load_table",
    "merge_lora",
    "metric_for",
    "new_classifier",
    "normalize_dna",
    "predict",
    "run_baseline",
    "save_adapter",
    "save_classifier",
    "split_by_chromosome",
    "split_by_column",
    "split_random",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
