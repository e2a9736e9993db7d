"""Refuse non-finite weights as they are loaded; name non-finite outputs at run time.

A checkpoint with one NaN or infinite weight (a diverged fine-tune, a broken conversion, a float32
value too large for float16) makes every forward NaN: scores, embeddings and samples that look
like results. Every weight reader checks each tensor once, as it is read and converted to the
dtype the model runs in, and raises :class:`NonFiniteWeightsError` naming the file and tensor.

The check is one ``torch.aminmax`` pass: NaN propagates to both ends and an infinity is an end,
so finite ends mean finite values. It streams the tensor at memory speed without allocating;
``torch.isfinite(t).all()`` writes a bool tensor first and measured 20-100x slower on the CPU.

Finite weights can still give non-finite outputs (activations that overflow float16/bfloat16, a
huge but finite weight). Every place that turns model outputs into results checks them and
reports a ``failed`` result whose reason is :func:`non_finite_output`, never a NaN that looks
like a number.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hexamer.tokenizer.folder import ModelFolderError

__all__ = [
    "NonFiniteOutputError",
    "NonFiniteWeightsError",
    "check_finite_weight",
    "finite_rows",
    "non_finite_output",
]


class NonFiniteWeightsError(ModelFolderError):
    """A model folder holds (or its load produced) NaN or infinite weights."""


class NonFiniteOutputError(RuntimeError):
    """The model's output was NaN or infinite where a caller asked for numbers (``base_logprobs``);
    calls that return rows with a status report a ``failed`` row instead of raising."""


def check_finite_weight(
    tensor: torch.Tensor, name: str, file: str | Path, stored: torch.Tensor | None = None
) -> None:
    """Raise :class:`NonFiniteWeightsError` unless every value of ``tensor`` is finite.

    ``tensor`` is the weight as the model will hold it; ``stored`` (optional) the tensor as read
    from ``file`` before its conversion, so that a finite value the conversion overflowed (a
    float32 1e6 loaded as float16) is told apart from a value stored as NaN/inf. Integer tensors
    (int8 codes) are always finite.
    """
    if not tensor.is_floating_point() or _all_finite(tensor):
        return
    where = f"tensor '{name}' in {file}"
    if stored is not None and stored.is_floating_point() and _all_finite(stored):
        n = int((~torch.isfinite(tensor)).sum())
        target = str(tensor.dtype).removeprefix("torch.")
        raise NonFiniteWeightsError(
            f"{where} overflows {target}: {_count(n, 'stored value')} become infinite (largest "
            f"|value| {float(stored.abs().max()):.3g}); load it in a wider dtype (float32)"
        )
    values = tensor if stored is None or not stored.is_floating_point() else stored
    nan = int(torch.isnan(values).sum())
    inf = int(torch.isinf(values).sum())
    parts = [_count(nan, "NaN value"), _count(inf, "infinite value")]
    raise NonFiniteWeightsError(
        f"{where} has {' and '.join(p for p in parts if p)} (of {values.numel()}); "
        "the checkpoint is broken (a diverged training run or a failed conversion)"
    )


def non_finite_output(what: str) -> str:
    """The reason of a result spoiled by NaN/inf model outputs, e.g. ``non_finite_output("embedding")``."""
    return (
        f"non-finite {what}: the model's output is NaN or infinite (activations that overflow this "
        "dtype, or broken weights)"
    )


def finite_rows(values: torch.Tensor) -> torch.Tensor:
    """``(B,)`` bool: True where every value of ``values[b]`` (any shape per row) is finite."""
    if values.numel() == 0:
        return torch.ones(values.shape[0], dtype=torch.bool, device=values.device)
    flat = values.reshape(values.shape[0], -1)
    return torch.isfinite(flat.amax(-1)) & torch.isfinite(flat.amin(-1))


def _all_finite(tensor: torch.Tensor) -> bool:
    if tensor.numel() == 0:
        return True
    lo, hi = torch.aminmax(tensor)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def _count(n: int, what: str) -> str:
    return "" if n == 0 else f"{n} {what}" if n == 1 else f"{n} {what}s"
