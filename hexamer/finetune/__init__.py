"""Supervised fine-tuning of Carbon models: regression and classification heads.

* :mod:`~hexamer.finetune.task`: `TaskSpec` (kind, outputs) and `LabelledSet` (rows to train on);
* :mod:`~hexamer.finetune.options`: `FitOptions` and `LoraOptions`, range-checked (torch-free);
* :mod:`~hexamer.finetune.head`: `SequenceClassifier`, a score head on hexamer's Llama;
* :mod:`~hexamer.finetune.folders`: head folders in ``transformers``' layout (save / load);
* :mod:`~hexamer.finetune.lora`: LoRA adapters (``peft``'s maths and files), merged on export;
* :mod:`~hexamer.finetune.fit`: ``fit`` (full / lora / probe), its losses
  (:mod:`~hexamer.finetune.losses`), loop (:mod:`~hexamer.finetune.fit_loop`) and resumable
  checkpoints (:mod:`~hexamer.finetune.state`); its best-checkpoint folders
  (:mod:`~hexamer.finetune.best_folder`: a probe's head beside links to the unchanged backbone)
  and the logistic-regression probe (:mod:`~hexamer.finetune.probe`);
* :mod:`~hexamer.finetune.apply`, :mod:`~hexamer.finetune.effects`: a head folder applied to
  sequences, regions and variants (``hexamer predict``); :mod:`~hexamer.finetune.shared`: a head
  served on the language model's own decoder (``hexamer serve --head``);
* :mod:`~hexamer.finetune.predict`: ``predict`` (optionally averaged over both strands);
* :mod:`~hexamer.finetune.data` (with :mod:`~hexamer.finetune.inputs`, :mod:`~hexamer.finetune.labels`):
  labelled tables, FASTA + labels, BED + reference, checked before any training;
* :mod:`~hexamer.finetune.splits`: chromosome, column, random and k-fold splits;
* :mod:`~hexamer.finetune.transform`: label z-scoring fitted on train, high-activity duplication;
* :mod:`~hexamer.finetune.metrics`: regression and classification metrics, the selection metric;
* :mod:`~hexamer.finetune.baseline`: the k-mer ridge / logistic baseline;
* :mod:`~hexamer.finetune.report`: metrics.json, prediction tables, figures;
* :mod:`~hexamer.finetune.run`: ``run_finetune``, the whole run behind ``hexamer finetune``;
* :mod:`~hexamer.finetune.kfold`: ``run_kfold``, k-fold cross-validation (NT protocol).

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
    from hexamer.finetune.fit import FitResult
    from hexamer.finetune.fit_loop import FitProgress
    from hexamer.finetune.folders import is_head_folder, load_classifier, new_classifier, save_classifier
    from hexamer.finetune.head import HeadSettings, SequenceClassifier
    from hexamer.finetune.inputs import DataError
    from hexamer.finetune.kfold import run_kfold
    from hexamer.finetune.lora import add_lora, load_adapter, merge_lora, save_adapter
    from hexamer.finetune.metrics import evaluate, metric_for
    from hexamer.finetune.run import InputSpec, RunResult, SplitSpec, run_finetune
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
    "run_kfold": "hexamer.finetune.kfold",
    "InputSpec": "hexamer.finetune.run",
    "RunResult": "hexamer.finetune.run",
    "SplitSpec": "hexamer.finetune.run",
    "run_finetune": "hexamer.finetune.run",
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
    "FitProgress": "hexamer.finetune.fit_loop",
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
    "BaselineResult",
    "DataError",
    "FitOptions",
    "FitProgress",
    "FitResult",
    "HeadSettings",
    "InputSpec",
    "LabelTransform",
    "LabelledSet",
    "LoraOptions",
    "ReadOptions",
    "ReadResult",
    "RunResult",
    "SequenceClassifier",
    "Split",
    "SplitError",
    "SplitSpec",
    "TaskKind",
    "TaskSpec",
    "add_lora",
    "check_lengths",
    "duplicate_high_activity",
    "evaluate",
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
    "run_baseline",
    "run_finetune",
    "run_kfold",
    "save_adapter",
    "save_classifier",
    "split_by_chromosome",
    "split_by_column",
    "split_random",
]

__getattr__ = lazy_getattr(__name__, _LAZY)
