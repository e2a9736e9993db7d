"""Predictions and pooled features of a `SequenceClassifier`, in batches, in input order.

``rc_average`` averages the outputs of each sequence and of its reverse complement: a regulatory
element is read on both strands, so the average removes the strand the assay happened to clone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from hexamer.finetune.folders import load_classifier
from hexamer.finetune.head import SequenceClassifier
from hexamer.finetune.losses import outputs_of
from hexamer.io import reverse_complement

__all__ = ["autocast_context", "pooled_features", "predict", "run_batches"]


def autocast_context(device: torch.device, bf16: bool) -> contextlib.AbstractContextManager[object]:
    """bf16 autocast on ``device`` when asked, else nothing."""
    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _length_batches(sequences: Sequence[str], batch_size: int) -> Iterator[np.ndarray]:
    """Index batches of similar lengths (less padding), covering every row once."""
    order = np.argsort([len(s) for s in sequences], kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


@torch.no_grad()
def run_batches(
    model: SequenceClassifier,
    sequences: Sequence[str],
    fn: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    *,
    batch_size: int,
    bf16: bool = False,
) -> np.ndarray:
    """``fn(ids, mask)`` on every sequence (eval mode), rows back in input order, float32."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    was_training = model.training
    model.eval()
    out: np.ndarray | None = None
    try:
        for index in _length_batches(sequences, batch_size):
            rows = model.encode([sequences[i] for i in index])
            with autocast_context(model.device, bf16):
                values = fn(rows.ids_on(model.device), rows.mask_on(model.device))
            values_np = values.float().cpu().numpy()
            if out is None:
                out = np.empty((len(sequences), *values_np.shape[1:]), dtype=np.float32)
            out[index] = values_np
    finally:
        model.train(was_training)
    assert out is not None
    return out


def pooled_features(
    model: SequenceClassifier, sequences: Sequence[str], *, batch_size: int = 32, bf16: bool = False
) -> np.ndarray:
    """The pooled hidden state the head reads, ``(n, hidden)`` float32 (what a probe trains on)."""
    return run_batches(model, sequences, model.features, batch_size=batch_size, bf16=bf16)


def predict(
    model_or_folder: SequenceClassifier | str | os.PathLike[str],
    sequences: Sequence[str],
    *,
    batch_size: int = 32,
    rc_average: bool | None = None,
    bf16: bool = False,
    device: str = "cpu",
) -> np.ndarray:
    """Model-scale outputs ``(n, num_labels)`` float32: regression values (still on the scale of
    the transformed training labels: the caller inverts its label transform), or class
    probabilities. ``rc_average`` None = the head folder's own setting."""
    if isinstance(model_or_folder, SequenceClassifier):
        model = model_or_folder
    else:
        model = load_classifier(model_or_folder, device=device)
    sequences = list(sequences)
    if not sequences:
        return np.zeros((0, model.task.num_labels), dtype=np.float32)
    average = model.settings.rc_average if rc_average is None else rc_average

    def outputs(ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return outputs_of(model.task, model(ids, mask))

    out = run_batches(model, sequences, outputs, batch_size=batch_size, bf16=bf16)
    if average:
        rc = [reverse_complement(s) for s in sequences]
        out = (out + run_batches(model, rc, outputs, batch_size=batch_size, bf16=bf16)) / 2
    return out
