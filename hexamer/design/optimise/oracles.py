"""Oracles: what sequence design maximises besides naturalness. Each is a callable from a batch of
sequences to a ``(n,)`` float64 array, larger = better.

* :class:`CallableOracle` wraps any Python function (checked: one finite number per sequence).
* :class:`PwmOracle` scores a position weight matrix on both strands: the best site's score
  (``mode="max"``) or the number of sites at or above a threshold (``mode="count"``).
* :class:`MotifCountOracle` counts the positions where an IUPAC motif matches on either strand.
* :class:`HeadOracle` runs a head folder saved by ``hexamer finetune`` (through
  :class:`hexamer.finetune.apply.Predictor`): one output, or the specificity of one output (it
  minus the largest of the others).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np

from hexamer.engine.params import IUPAC

if TYPE_CHECKING:
    from hexamer.finetune.apply import Predictor

__all__ = [
    "CallableOracle",
    "HeadOracle",
    "MotifCountOracle",
    "Oracle",
    "PwmOracle",
    "by_length",
    "checked_scores",
    "one_hot",
]

_INDEX = np.full(256, -1, dtype=np.int64)
for _i, _b in enumerate("ACGT"):
    _INDEX[ord(_b)] = _i


@runtime_checkable
class Oracle(Protocol):
    """A batch of sequences to one score each (``(n,)`` float64, larger = better)."""

    name: str

    def __call__(self, sequences: Sequence[str]) -> np.ndarray: ...


def checked_scores(values: object, n: int, name: str) -> np.ndarray:
    """``values`` as ``(n,)`` float64, refused (naming the oracle) when the shape is wrong or a
    value is not finite: an optimiser must never rank on a NaN."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.shape != (n,):
        raise ValueError(f"oracle {name!r} returned shape {arr.shape} for {n} sequences (want ({n},))")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(
            f"oracle {name!r} returned a non-finite score for sequence {int(bad[0])}: {arr[bad[0]]}"
        )
    return arr


def one_hot(sequences: Sequence[str]) -> np.ndarray:
    """``(n, L, 4)`` float64 A,C,G,T one-hot of equal-length ACGT sequences."""
    codes = np.array([np.frombuffer(s.encode("ascii"), dtype=np.uint8) for s in sequences])
    idx = _INDEX[codes]
    if (idx < 0).any():
        raise ValueError("oracle input must be A/C/G/T text")
    return np.eye(4)[idx]


def by_length(sequences: Sequence[str], score: Callable[[list[str]], np.ndarray]) -> np.ndarray:
    """``score`` run on each group of equal-length sequences (one-hot batches need one length)."""
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(sequences):
        groups.setdefault(len(s), []).append(i)
    out = np.empty(len(sequences), dtype=np.float64)
    for members in groups.values():
        out[members] = score([sequences[i] for i in members])
    return out


class CallableOracle:
    """Any function from a list of sequences to one number each."""

    def __init__(self, fn: Callable[[list[str]], object], name: str = "callable") -> None:
        self.fn = fn
        self.name = name

    def __call__(self, sequences: Sequence[str]) -> np.ndarray:
        return checked_scores(self.fn(list(sequences)), len(sequences), self.name)


class PwmOracle:
    """A position weight matrix ``(width, 4)`` of log-odds scores (columns A, C, G, T), scanned on
    both strands. ``mode="max"``: the best site's score; ``mode="count"``: sites (position and
    strand) scoring at least ``threshold``."""

    def __init__(
        self,
        weights: object,
        *,
        mode: Literal["max", "count"] = "max",
        threshold: float | None = None,
        name: str = "pwm",
    ) -> None:
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 2 or w.shape[1] != 4 or w.shape[0] < 1:
            raise ValueError(f"a PWM is a (width, 4) matrix with columns A, C, G, T; got shape {w.shape}")
        if not np.isfinite(w).all():
            raise ValueError("PWM weights must be finite")
        if mode not in ("max", "count"):
            raise ValueError(f"mode must be 'max' or 'count', got {mode!r}")
        if mode == "count" and threshold is None:
            raise ValueError("mode='count' needs a threshold")
        self.weights = w
        self.rc_weights = w[::-1, ::-1].copy()  # reverse strand: reversed rows, A<->T and C<->G
        self.mode = mode
        self.threshold = threshold
        self.name = name

    @classmethod
    def from_counts(cls, counts: object, *, pseudocount: float = 0.5, **options: object) -> PwmOracle:
        """Log-odds (natural log, uniform background) from a ``(width, 4)`` count or frequency matrix."""
        c = np.asarray(counts, dtype=np.float64)
        if c.ndim != 2 or c.shape[1] != 4 or (c < 0).any() or pseudocount < 0:
            raise ValueError("counts must be a non-negative (width, 4) matrix and pseudocount >= 0")
        p = (c + pseudocount) / (c + pseudocount).sum(axis=1, keepdims=True)
        return cls(np.log(p / 0.25), **options)  # type: ignore[arg-type]

    def site_scores(self, sequences: Sequence[str]) -> np.ndarray:
        """``(n, 2, L - width + 1)`` every window's score, forward strand then reverse."""
        x = one_hot(sequences)
        width = self.weights.shape[0]
        if x.shape[1] < width:
            raise ValueError(f"sequences of {x.shape[1]} bp are shorter than the {width}-bp PWM")
        win = np.lib.stride_tricks.sliding_window_view(x, width, axis=1)  # (n, W, 4, width)
        fwd = np.einsum("nwbj,jb->nw", win, self.weights)
        rev = np.einsum("nwbj,jb->nw", win, self.rc_weights)
        return np.stack([fwd, rev], axis=1)

    def __call__(self, sequences: Sequence[str]) -> np.ndarray:
        return by_length(sequences, self._score)

    def _score(self, sequences: list[str]) -> np.ndarray:
        s = self.site_scores(sequences)
        if self.mode == "max":
            return s.max(axis=(1, 2))
        assert self.threshold is not None
        return (s >= self.threshold).sum(axis=(1, 2)).astype(np.float64)


class MotifCountOracle:
    """The number of positions where an IUPAC ``motif`` matches the forward strand or the reverse
    complement (a palindromic site counts once)."""

    def __init__(self, motif: str, name: str | None = None) -> None:
        motif = motif.strip().upper()
        bad = sorted(set(motif) - set(IUPAC))
        if not motif or bad:
            raise ValueError(f"motif {motif!r}: not IUPAC nucleotide codes {bad}")
        allowed = np.array([[b in IUPAC[c] for b in "ACGT"] for c in motif], dtype=np.float64)
        self.motif = motif
        self.width = len(motif)
        self._fwd = allowed
        self._rev = allowed[::-1, ::-1].copy()
        self.name = name or f"count({motif})"

    def __call__(self, sequences: Sequence[str]) -> np.ndarray:
        return by_length(sequences, self._count)

    def _count(self, sequences: list[str]) -> np.ndarray:
        x = one_hot(sequences)
        if x.shape[1] < self.width:
            return np.zeros(len(sequences))
        win = np.lib.stride_tricks.sliding_window_view(x, self.width, axis=1)
        fwd = np.einsum("nwbj,jb->nw", win, self._fwd) == self.width
        rev = np.einsum("nwbj,jb->nw", win, self._rev) == self.width
        return (fwd | rev).sum(axis=1).astype(np.float64)


class HeadOracle:
    """A fine-tuned head's output ``target`` (a column of :attr:`Predictor.columns`, or a class or
    target name), or with ``specificity`` that output minus the largest of the others."""

    def __init__(self, predictor: Predictor, target: str | None = None, *, specificity: bool = False) -> None:
        columns = list(predictor.columns)
        names = list(predictor.task.output_names)
        if target is None:
            if len(columns) != 1:
                raise ValueError(f"the head has {len(columns)} outputs; name a target: {', '.join(columns)}")
            index = 0
        elif target in columns:
            index = columns.index(target)
        elif target in names:
            index = names.index(target)
        else:
            raise ValueError(
                f"target {target!r} is not an output of the head (outputs: {', '.join(columns)})"
            )
        if specificity and len(columns) < 2:
            raise ValueError("specificity needs a head with at least two outputs")
        self.predictor = predictor
        self.index = index
        self.specificity = specificity
        self.name = ("specificity:" if specificity else "") + columns[index]

    @classmethod
    def load(
        cls,
        folder: str | os.PathLike[str],
        target: str | None = None,
        *,
        specificity: bool = False,
        **options: object,
    ) -> HeadOracle:
        """Load a head folder (``options`` go to :meth:`Predictor.load`: dtype, device, batch_size...)."""
        from hexamer.finetune.apply import Predictor

        return cls(Predictor.load(folder, **options), target, specificity=specificity)  # type: ignore[arg-type]

    def __call__(self, sequences: Sequence[str]) -> np.ndarray:
        out = np.asarray(self.predictor.predict(list(sequences)), dtype=np.float64)
        value = out[:, self.index]
        if self.specificity:
            others = np.delete(out, self.index, axis=1)
            value = value - others.max(axis=1)
        return checked_scores(value, len(sequences), self.name)
