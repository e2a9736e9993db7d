"""What scoring and generation return, local or served: :class:`Generation`, :class:`ScoreResult`."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hexamer.model.finite import NonFiniteOutputError, non_finite_output

if TYPE_CHECKING:
    from hexamer.fns.scoring import BpScore

__all__ = [
    "FailedResultWarning",
    "Generation",
    "ScoreResult",
    "UnscoredSequenceWarning",
    "bp_score_result",
    "checked_base_logprobs",
    "per_base_values",
    "warn_unscored",
]


class UnscoredSequenceWarning(UserWarning):
    """:meth:`Carbon.score` got a sequence with no scorable base (every 6-mer holds a non-ACGT
    character): its ``mean`` is NaN and its ``status`` is ``"unscored"``."""


class FailedResultWarning(UserWarning):
    """A result is ``failed``: the model's output was NaN or infinite (weights that overflow the
    dtype, or broken ones), so it holds no number (``status == "failed"``, ``reason`` says why)."""


@dataclass
class Generation:
    """One generated continuation.

    ``status`` is ``"ok"``, or ``"failed"`` when the model's output turned NaN or infinite while
    generating (``finish_reason`` ``"error"``, ``reason`` says why; ``sequence`` holds the bases
    drawn before, from finite outputs)."""

    prompt: str
    sequence: str  # the new bases only
    finish_reason: str  # "length" or "end_tag"
    n_prompt_tokens: int
    n_new_tokens: int
    n_prompt_oov_bases: int  # prompt bases lost to <oov> chunks (non-ACGT characters)
    token_ids: list[int]
    #: with ``logprobs=True``: the raw model's log-probability of each new base (bp mode: its FNS
    #: marginal) or of each new 6-mer (token mode: log-softmax over the 6-mer block); else None
    logprobs: np.ndarray | None = None
    status: str = "ok"
    reason: str | None = None

    @property
    def n_bp(self) -> int:
        return len(self.sequence)


@dataclass
class ScoreResult:
    """Log-likelihood of one sequence under the model.

    ``mean`` is the mean log-probability over the scored bases (bp level) or full 6-mers (token
    level). ``per_base[i]`` is log P(base i | everything before it) at bp level, NaN where a base was
    not scored (inside an ``<oov>`` chunk); None at token level, where ``per_token`` is given.
    ``status`` is ``"ok"``, or ``"unscored"`` when nothing could be scored (``n_scored == 0``:
    every 6-mer holds a non-ACGT character), or ``"failed"`` when the mean is not a finite number:
    the model's output was NaN or infinite (``mean`` NaN), or a served model's top-N left a true
    6-mer out (``mean`` -inf); ``reason`` says why.
    """

    mean: float
    n_scored: int
    n_oov_bases: int
    per_base: np.ndarray | None = None
    per_token: np.ndarray | None = None
    status: str = "ok"
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.n_scored == 0 and self.status == "ok":
            self.status = "unscored"
            self.mean = float("nan")
            self.reason = self.reason or (
                f"no base scored: all {self.n_oov_bases} bases are in <oov> 6-mers (a non-ACGT character)"
                if self.n_oov_bases
                else "nothing to score (token level scores whole 6-mers only)"
            )
        elif self.status == "ok" and self.mean == -math.inf:  # kept: what the served values give
            self.status = "failed"
            self.reason = self.reason or (
                "log-probability -inf: a scored base or 6-mer got probability 0 (a served model's "
                "top-N log-probabilities left the true 6-mer out)"
            )
        elif self.status == "ok" and not math.isfinite(self.mean):
            self.status = "failed"
            self.mean = float("nan")
            self.reason = self.reason or non_finite_output("log-probability")

    @property
    def sum(self) -> float:
        """Total log-likelihood of the scored bases (bp level) or 6-mers (token level), in nats:
        ``mean * n_scored``, summed in float64 from the per-position values when present; NaN for
        a ``failed`` result (never the 0 of an empty sum)."""
        if self.status == "failed":
            return float("nan")
        values = self.per_base if self.per_base is not None else self.per_token
        if values is not None:
            return float(np.nansum(np.asarray(values, dtype=np.float64)))
        return float(self.mean) * self.n_scored


def warn_unscored(
    results: Sequence[ScoreResult], *, stacklevel: int, category: type[Warning] = UnscoredSequenceWarning
) -> None:
    """Warn once, naming the first ten, when some ``results`` have no scorable base, and once more
    (:class:`FailedResultWarning`) when some are ``failed``; ``stacklevel`` is what the caller would
    pass to ``warnings.warn`` itself."""
    failed = [i for i, r in enumerate(results) if r.status == "failed"]
    if failed:
        warnings.warn(
            f"{len(failed)} of {len(results)} results failed ({results[failed[0]].reason}): "
            f"{_indices(failed)}",
            FailedResultWarning,
            stacklevel=stacklevel + 1,
        )
    unscored = [i for i, r in enumerate(results) if r.status not in ("ok", "failed")]
    if unscored:
        warnings.warn(
            f"{len(unscored)} of {len(results)} sequences have no scorable base (every 6-mer holds a "
            f"non-ACGT character; mean is NaN, status 'unscored'): {_indices(unscored)}",
            category,
            stacklevel=stacklevel + 1,
        )


def _indices(rows: list[int]) -> str:
    return "sequence " + ", ".join(map(str, rows[:10])) + (" ..." if len(rows) > 10 else "")


def per_base_values(score: BpScore, length: int) -> np.ndarray:
    """A bp-level score's log P(base) of the first ``length`` bases in sequence order, float32,
    NaN where no base was scored (padding, ``<oov>`` chunks): ``ScoreResult.per_base``."""
    keep = score.base_mask.reshape(-1).cpu().numpy()
    values = np.full(keep.shape[0], np.nan, dtype=np.float32)
    values[keep] = score.per_base.reshape(-1).float().cpu().numpy()[keep]
    return values[:length]


def bp_score_result(score: BpScore, length: int, n_oov_bases: int) -> ScoreResult:
    """The :class:`ScoreResult` of a bp-level score of a ``length``-base sequence."""
    return ScoreResult(
        mean=float(score.mean),
        n_scored=int(score.n_bases),
        n_oov_bases=n_oov_bases,
        per_base=per_base_values(score, length),
    )


def checked_base_logprobs(lp: np.ndarray, n_real: np.ndarray, k: int) -> np.ndarray:
    """``lp`` (``(L, 4)`` log P(base), as ``base_logprobs`` returns it), or
    :class:`~hexamer.model.finite.NonFiniteOutputError` when a row of a scored base (its 6-mer not
    ``<oov>``: ``n_real > 0``) is NaN or +inf, i.e. the model's output was not finite. (-inf stays: a
    served model's top-N log-probabilities can give a base no mass.)"""
    scored = np.repeat(np.asarray(n_real) > 0, k)[: len(lp)]
    rows = lp[scored]
    if np.isnan(rows).any() or np.isposinf(rows).any():
        raise NonFiniteOutputError(non_finite_output("base log-probabilities"))
    return lp
