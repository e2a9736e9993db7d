"""Held-out evaluation: per-base accuracy of a model and of simple baselines on the same bases.

The model's prediction of base ``j`` of a 6-mer is the argmax of its FNS marginal ``P_j``, which
sees only the tokens before that 6-mer: base 5 is predicted six bases ahead, blind to bases 0..4.
Two Markov baselines bracket it:

* ``aligned``: same information as the FNS marginals - base ``6t + j`` predicted from the
  ``order`` bases before ``6t`` (a separate table per ``j``);
* ``next-base``: the classic model, from the ``order`` bases right before the base (more
  information than an FNS marginal has).

Every baseline is estimated on the training split (both strands, as the model is trained with
reverse-complement augmentation) and scored on exactly the bases the model is scored on: the
held-out windows, real bases only, bases in ``<oov>`` chunks excluded, and a window's first bases
see only the context inside the window (lower orders back off).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hexamer.io import reverse_complement
from hexamer.model import LlamaModel, load_model
from hexamer.tokenizer import CarbonTokenizer
from hexamer.train.data import Segment, batches, load_corpus, validation_windows
from hexamer.train.objective import base_accuracy, supervised_logits

__all__ = [
    "EvalResult",
    "composition_accuracy",
    "evaluate_folder",
    "evaluate_model",
    "markov_accuracy",
]

_ACGT_CODE = np.full(256, -1, dtype=np.int8)
for _i, _b in enumerate(b"ACGT"):
    _ACGT_CODE[_b] = _i


@dataclass
class EvalResult:
    """Held-out metrics: ``accuracy`` (argmax of the FNS marginals), ``bp_loss`` (mean -log P_j of
    the true base, block-renormalised), per within-token position too."""

    n_bases: int
    accuracy: float
    bp_loss: float
    accuracy_by_position: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@torch.inference_mode()
def evaluate_model(
    model: LlamaModel,
    tokenizer: CarbonTokenizer,
    windows: Sequence[tuple[str, str]],
    *,
    batch_size: int = 8,
    device: torch.device | str = "cpu",
    bf16: bool = False,
) -> EvalResult:
    """Accuracy and FNS loss of ``model`` on (tag, bases) windows (see :func:`validation_windows`)."""
    layout = tokenizer.layout
    k = layout.k
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else layout.end_id
    device = torch.device(device)
    right = torch.zeros(k, dtype=torch.float64)
    total = torch.zeros(k, dtype=torch.float64)
    nll = torch.zeros(k, dtype=torch.float64)
    for batch in batches(tokenizer, windows, batch_size, pad):
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            logits, labels, valid = supervised_logits(model, batch.to(device))
        r, n, s = base_accuracy(logits, labels, valid, kmer_start=layout.kmer_start, k=k)
        right += r.double().cpu()
        total += n.double().cpu()
        nll += s.double().cpu()
    n_bases = int(total.sum())
    if n_bases == 0:
        return EvalResult(0, float("nan"), float("nan"), [float("nan")] * k)
    by_pos = (right / total.clamp(min=1)).tolist()
    return EvalResult(n_bases, float(right.sum() / n_bases), float(nll.sum() / n_bases), by_pos)


def evaluate_folder(
    model_dir: str | os.PathLike[str],
    data: Sequence[str | os.PathLike[str]],
    *,
    val_fraction: float = 0.1,
    window_bp: int = 6000,
    max_bp: int = 0,
    batch_size: int = 4,
) -> EvalResult:
    """Held-out accuracy of a saved model on the last ``val_fraction`` of each sequence in ``data``
    (the split ``hexamer train`` uses), in float32 on the CPU."""
    folder = Path(model_dir)
    model, _ = load_model(folder, dtype=torch.float32)
    tokenizer = CarbonTokenizer.from_pretrained(folder)
    corpus = load_corpus([str(p) for p in data], val_fraction=val_fraction)
    windows = validation_windows(corpus.val, window_bp, max_bp)
    return evaluate_model(model, tokenizer, windows, batch_size=batch_size)


# ---------------------------------------------------------------------------------------------
# baselines


def _codes(bases: str) -> np.ndarray:
    return _ACGT_CODE[np.frombuffer(bases.encode("ascii"), dtype=np.uint8)]


def _scored_mask(codes: np.ndarray, k: int) -> np.ndarray:
    """Bases the model scores: real bases of chunks without any non-ACGT character."""
    n = len(codes)
    chunks = -(-n // k)
    padded = np.zeros(chunks * k, dtype=bool)
    padded[:n] = codes >= 0
    ok = padded.reshape(chunks, k)
    # the padded tail of the last chunk is "A", a valid base: only real bases count as bad
    if n % k:
        ok[-1, n % k :] = True
    return np.repeat(ok.all(1), k)[:n]


def composition_accuracy(train: Sequence[Segment], windows: Sequence[tuple[str, str]], k: int = 6) -> float:
    """0-th order baseline: always predict the most frequent base of the training split."""
    counts = np.zeros(4, dtype=np.int64)
    for s in train:
        c = _codes(s.bases)
        counts += np.bincount(c[c >= 0], minlength=4)
    best = int(counts.argmax())
    right = total = 0
    for _, bases in windows:
        c = _codes(bases)
        scored = _scored_mask(c, k)
        right += int((c[scored] == best).sum())
        total += int(scored.sum())
    return right / max(total, 1)


def _context_index(codes: np.ndarray, order: int) -> np.ndarray:
    """Index (base 4) of the ``order`` bases ending at each position i (i.e. codes[i-order+1..i]);
    -1 where the context is incomplete or holds a non-ACGT base."""
    n = len(codes)
    idx = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    for m in range(order):
        shifted = np.full(n, -1, dtype=np.int64)
        if n - m > 0:
            shifted[m:] = codes[: n - m]
        idx += np.where(shifted >= 0, shifted, 0) * 4**m
        bad |= shifted < 0
    idx[bad] = -1
    return idx


class _Markov:
    """Counts for orders 0..order; ``table[o][ctx, lag, base]``: ``base`` observed ``lag`` + 1
    positions after the context ``ctx`` of ``o`` bases (``lag`` 0 = the classic next base)."""

    def __init__(self, order: int, lags: int) -> None:
        self.order = order
        self.lags = lags
        self.table = [np.zeros((4**o, lags, 4), dtype=np.int64) for o in range(order + 1)]

    def fit(self, bases: str) -> None:
        codes = _codes(bases)
        n = len(codes)
        for o in range(self.order + 1):
            ctx = _context_index(codes, o) if o else np.zeros(n, dtype=np.int64)
            for lag in range(self.lags):
                # context ends at i - lag - 1, base at i
                i = np.arange(o + lag, n) if o else np.arange(lag, n)
                c = ctx[i - lag - 1] if o else np.zeros(len(i), dtype=np.int64)
                b = codes[i]
                ok = (c >= 0) & (b >= 0)
                np.add.at(self.table[o], (c[ok], lag, b[ok]), 1)

    def predict(self, codes: np.ndarray, ends: np.ndarray, lags: np.ndarray) -> np.ndarray:
        """Argmax base for each query: context ending at ``ends`` (-1: none), gap ``lags``."""
        pred = np.full(len(ends), -1, dtype=np.int64)
        for o in range(self.order, -1, -1):
            todo = pred < 0
            if not todo.any():
                break
            if o == 0:
                ctx = np.zeros(int(todo.sum()), dtype=np.int64)
                rows = self.table[0][ctx, lags[todo]]
                pred[todo] = rows.argmax(-1)
                break
            e = ends[todo]
            has = e >= o - 1
            ctx = np.full(len(e), -1, dtype=np.int64)
            full = _context_index(codes, o)
            ctx[has] = full[e[has]]
            rows = np.zeros((len(e), 4), dtype=np.int64)
            ok = ctx >= 0
            rows[ok] = self.table[o][ctx[ok], lags[todo][ok]]
            seen = rows.sum(-1) > 0
            sub = np.where(todo)[0]
            pred[sub[seen]] = rows[seen].argmax(-1)
        return pred


def markov_accuracy(
    train: Sequence[Segment],
    windows: Sequence[tuple[str, str]],
    *,
    order: int,
    aligned: bool,
    k: int = 6,
) -> float:
    """Accuracy of an order-``order`` Markov chain on the held-out windows (see the module doc)."""
    model = _Markov(order, k if aligned else 1)
    for s in train:
        model.fit(s.bases)
        model.fit(reverse_complement(s.bases))
    right = total = 0
    for _, bases in windows:
        codes = _codes(bases)
        pos = np.arange(len(codes))
        scored = _scored_mask(codes, k)
        if aligned:
            lags = pos % k
            ends = pos - lags - 1  # last base before the token holding pos
        else:
            lags = np.zeros(len(codes), dtype=np.int64)
            ends = pos - 1
        pred = model.predict(codes, ends, lags)
        right += int((pred[scored] == codes[scored]).sum())
        total += int(scored.sum())
    return right / max(total, 1)
