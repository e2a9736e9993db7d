"""`fit`: train a sequence head on a Carbon model (full fine-tuning, LoRA or a linear probe).

The micro-batch stream is a pure function of the seed (epoch ``e`` is a permutation drawn from
``(seed, e)``, the strand of each row from ``(seed, micro-batch)``) and the learning rate a pure
function of the step, so a run resumed from its checkpoint replays the same batches and ends on
the same weights as one that never stopped. The best evaluation is saved as a head folder
(``<output_dir>/best``; a LoRA run also writes its adapter to ``<output_dir>/best_adapter``).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hexamer.finetune.best_folder import BEST_ADAPTER_DIR, BEST_DIR, BestWriter
from hexamer.finetune.embedding_rows import train_dna_block_only
from hexamer.finetune.fit_loop import FitProgress, Trainer
from hexamer.finetune.folders import new_classifier
from hexamer.finetune.head import HeadSettings, SequenceClassifier, layer_index
from hexamer.finetune.lora import add_lora
from hexamer.finetune.losses import check_loss, default_loss
from hexamer.finetune.options import FitOptions
from hexamer.finetune.state import data_fingerprint, read_fit_state
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.model.checkpoint import read_folder_config
from hexamer.model.train_heap import training_heap
from hexamer.model.train_kernels import drop_bf16_copies, use_onednn_training_linears
from hexamer.model.train_ops import use_fused_training_ops
from hexamer.tokenizer import CarbonTokenizer

__all__ = ["FitResult", "build_model", "fit", "use_training_fast_paths"]


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit` did: the best head folder, its step and score, every evaluation."""

    best_folder: Path
    best_step: int
    best_score: float | None
    steps: int
    stopped_early: bool
    history: list[dict[str, Any]] = field(default_factory=list)
    adapter_folder: Path | None = None


def _check_inputs(train: LabelledSet, valid: LabelledSet | None, task: TaskSpec, options: FitOptions) -> str:
    """Everything about the data and options that can be refused before the model is loaded."""
    if len(train) == 0:
        raise ValueError("the training set is empty")
    task.check_labels(train.labels, "training labels")
    if valid is not None:
        if len(valid) == 0:
            raise ValueError("the validation set is empty (pass valid=None to train without one)")
        task.check_labels(valid.labels, "validation labels")
    loss = options.loss or default_loss(task)
    check_loss(loss, task)
    if options.class_weights is not None:
        if loss not in ("ce", "bce"):
            raise ValueError(f"class_weights apply to the ce and bce losses, not {loss!r}")
        if len(options.class_weights) != task.num_labels:
            raise ValueError(
                f"class_weights has {len(options.class_weights)} values for {task.num_labels} outputs"
            )
    if loss == "pearson_huber" and options.batch_size < 2:
        raise ValueError("the pearson_huber loss needs batch_size >= 2 (Pearson r over the batch)")
    if options.probe_ridge is not None and (options.method != "probe" or loss != "mse"):
        raise ValueError("probe_ridge solves a regression probe trained with mse only")
    if options.probe_logistic and (options.method != "probe" or loss not in ("ce", "bce")):
        raise ValueError("probe_logistic fits a classification probe (ce or bce loss) only")
    if options.probe_logistic and options.probe_ridge is not None:
        raise ValueError("give probe_ridge (regression) or probe_logistic (classification), not both")
    return loss


def _check_against_model(
    base_folder: str | os.PathLike[str], options: FitOptions, sets: dict[str, LabelledSet | None]
) -> None:
    """Refuse a hidden layer the model lacks and an empty or over-long sequence (by name), from
    the folder's JSON files alone, before the weights are loaded."""
    _, config = read_folder_config(base_folder)
    layer_index(options.layer, config.num_hidden_layers)
    k = CarbonTokenizer.from_pretrained(base_folder).layout.k
    context = config.max_position_embeddings
    for what, rows in sets.items():
        for row_id, seq in zip(rows.ids if rows else (), rows.sequences if rows else (), strict=True):
            tokens = 2 + -(-len(seq) // k)
            if not seq or tokens > context:
                problem = "is empty" if not seq else f"({len(seq)} bp) needs {tokens} tokens"
                raise ValueError(
                    f"{what} row {row_id!r} {problem}; the model's context is {context} tokens "
                    f"(<dna> + {context - 2} {k}-mers + </dna> = {(context - 2) * k} bp)"
                )


def build_model(
    base_folder: str | os.PathLike[str], task: TaskSpec, options: FitOptions, settings: dict[str, Any]
) -> SequenceClassifier:
    """The model ``fit`` trains (``settings``: the other :class:`HeadSettings` fields): the method's
    trainable weights marked, the CPU training fast paths and gradient checkpointing as asked."""
    head = HeadSettings(task, pooling=options.pooling, layer=options.layer, **settings)
    torch.manual_seed(options.seed)
    model = new_classifier(base_folder, head, device=options.device, seed=options.seed)
    if options.method == "full":
        for p in model.parameters():
            p.requires_grad_(True)
        train_dna_block_only(model)  # the only embedding rows a DNA input reads
    elif options.method == "lora":
        add_lora(model, options.lora, seed=options.seed)
    elif options.method == "probe":
        for p in model.backbone.parameters():
            p.requires_grad_(False)
    if options.method != "probe" and model.device.type == "cpu":
        use_training_fast_paths(model)
    if options.grad_checkpointing and options.method != "probe":
        enable_grad_checkpointing(model)
    return model


def use_training_fast_paths(model: SequenceClassifier) -> None:
    """What a CPU training step runs on: the projections' products on oneDNN (faster than
    PyTorch's default CPU GEMM here) and RMSNorm, RoPE and SwiGLU as fused autograd functions
    (one cast per norm under bf16 autocast; a frozen weight cast to bf16 once for the run, not at
    every forward). Same parameters and state dict; same maths."""
    use_onednn_training_linears(model.backbone)
    use_fused_training_ops(model.backbone)


def enable_grad_checkpointing(model: SequenceClassifier) -> None:
    """Recompute each decoder layer in the backward pass instead of keeping its activations."""
    from torch.utils.checkpoint import checkpoint

    for layer in model.backbone.layers:
        plain = layer.forward

        def run(*args: Any, _plain: Callable[..., torch.Tensor] = plain) -> torch.Tensor:
            if torch.is_grad_enabled():
                return checkpoint(_plain, *args, use_reentrant=False)
            return _plain(*args)

        layer.forward = run


def fit(
    base_folder: str | os.PathLike[str],
    train: LabelledSet,
    valid: LabelledSet | None,
    task: TaskSpec,
    options: FitOptions,
    output_dir: str | os.PathLike[str],
    *,
    metric: Callable[[np.ndarray, np.ndarray], float] | None = None,
    higher_is_better: bool = True,
    on_progress: Callable[[FitProgress], None] | None = None,
    resume: bool = False,
    label_transform: dict[str, Any] | None = None,
) -> FitResult:
    """Train a head on the language model in ``base_folder`` and save the best one.

    Labels are already transformed (z-scored) by the caller; ``label_transform`` (its JSON) is
    stored in the head folder. ``metric(labels, outputs)`` scores the validation rows that
    ``metric_mask`` keeps (``outputs`` as :func:`~hexamer.finetune.predict.predict` returns them);
    without it the validation loss picks the best evaluation. ``resume=True`` continues the run
    checkpointed in ``output_dir``; without it an existing checkpoint there is an error.
    """
    loss = _check_inputs(train, valid, task, options)
    options = options.resolved(read_folder_config(base_folder)[1].hidden_size)  # default rates by size
    out = Path(output_dir)
    fingerprint = data_fingerprint(train, valid)
    saved = read_fit_state(out)
    if saved is not None and not resume:
        raise ValueError(
            f"{out} holds the checkpoint of a run (step {saved['step']}): pass resume=True to continue it, "
            "or choose another output folder"
        )
    if saved is not None:
        if saved.get("options") != options.to_json() or saved.get("task") != task.to_json():
            raise ValueError(
                f"{out}: the checkpoint was written with other options or another task; not resuming"
            )
        if saved.get("fingerprint") != fingerprint:
            raise ValueError(f"{out}: the checkpoint was trained on other rows; not resuming")
    _check_against_model(base_folder, options, {"training": train, "validation": valid})
    settings = {
        "label_transform": label_transform,
        "max_length": max(len(s) for s in train.sequences),
        "rc_augment": options.rc_augment,
        "rc_average": options.rc_average,
    }
    model = build_model(base_folder, task, options, settings)
    trainer = Trainer(model, train, valid, task, options, loss, metric, higher_is_better)
    trainer.fingerprint = fingerprint
    best = BestWriter(model, out, options, base_folder)
    trainer.save_best = best.save
    if saved is not None:
        trainer.restore(out, saved)
    try:
        # CPU: freed gradients and activations stay in the heap for the next step (no page faults)
        with training_heap() if trainer.device.type == "cpu" else contextlib.nullcontext():
            trainer.run(out, on_progress)
    finally:
        drop_bf16_copies(model)  # bf16 training: the frozen weights' copies (LoRA), no longer needed
    if valid is None or trainer.best_step < 0:
        best.save()
        trainer.best_step = trainer.step
    best.finish()  # LoRA: the merged head folder, once
    return FitResult(
        best_folder=out / BEST_DIR,
        best_step=trainer.best_step,
        best_score=None if math.isnan(trainer.best_score) else trainer.best_score,
        steps=trainer.step,
        stopped_early=trainer.stopped_early,
        history=list(trainer.history),
        adapter_folder=out / BEST_ADAPTER_DIR if options.method == "lora" else None,
    )
