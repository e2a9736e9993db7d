"""Speculative decoding's settings and bookkeeping: draft length (fixed or adaptive) and statistics.

A leaf module (no engine imports), so a :class:`~hexamer.engine.Request` can carry its
:class:`SpecConfig` and :class:`SpecStats`; the algorithm is in :mod:`hexamer.engine.draft`
(proposals) and :mod:`hexamer.engine.verify` (the target's check), the maths in
:mod:`hexamer.fns.speculative`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

__all__ = [
    "MAX_NUM_SPECULATIVE",
    "AdaptiveK",
    "NumSpeculative",
    "SpecConfig",
    "SpecStats",
    "best_k",
    "expected_tokens",
]

NumSpeculative = int | Literal["auto"]

#: most 6-mers a draft may propose per round when the number is fixed (``num_speculative``,
#: ``--spec-k``, the server's ``--draft-tokens`` and ``num_draft_tokens``): 96 bases, more than a
#: small draft's run of accepted 6-mers ever reaches; beyond it every round wastes draft forwards
MAX_NUM_SPECULATIVE = 16


@dataclass(frozen=True)
class SpecConfig:
    """How many tokens the draft proposes per round.

    ``k`` is the first round's draft length (and every round's when ``adaptive`` is off);
    adaptive rounds choose within ``[1, k_max]``. ``draft_cost`` is the cost of one draft forward
    relative to one target forward (None: estimated from per-token FLOPs). ``max_batch_size``
    bounds the rows decoded together.
    """

    k: int = 4
    adaptive: bool = True
    k_max: int = 8
    draft_cost: float | None = None
    max_batch_size: int = 16

    def __post_init__(self) -> None:
        for name in ("k", "k_max", "max_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.k > self.k_max:
            raise ValueError(f"k={self.k} exceeds k_max={self.k_max}")
        if self.draft_cost is not None and not (
            isinstance(self.draft_cost, int | float)
            and math.isfinite(self.draft_cost)
            and self.draft_cost >= 0
        ):
            raise ValueError(f"draft_cost must be a finite number >= 0, got {self.draft_cost!r}")

    @classmethod
    def from_option(cls, num_speculative: NumSpeculative | SpecConfig) -> SpecConfig:
        """``"auto"`` -> adaptive k in [1, 8] starting at 4; an int k (at most
        :data:`MAX_NUM_SPECULATIVE`) -> that k every round."""
        if isinstance(num_speculative, SpecConfig):
            return num_speculative
        if num_speculative == "auto":
            return cls()
        given = num_speculative
        if isinstance(num_speculative, str):
            try:
                num_speculative = int(num_speculative)
            except ValueError:
                num_speculative = 0
        if (
            not isinstance(num_speculative, int)
            or isinstance(num_speculative, bool)
            or not 1 <= num_speculative <= MAX_NUM_SPECULATIVE
        ):
            raise ValueError(
                f"num_speculative must be 'auto' or an integer in [1, {MAX_NUM_SPECULATIVE}], got {given!r}"
            )
        return cls(k=num_speculative, adaptive=False, k_max=num_speculative)


@dataclass
class SpecStats:
    """What speculative decoding did, summed over requests.

    A *row round* is one request's share of a target verify forward. ``accepted_per_forward`` is the
    mean number of draft tokens accepted per row round; ``tokens_per_forward`` counts the token the
    target adds (replacement or bonus) too, so plain decoding would score 1.0.
    """

    row_rounds: int = 0
    target_forwards: int = 0  # batched verify forwards (prefill not counted)
    draft_forwards: int = 0  # batched draft forwards (prefill not counted)
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    k_counts: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def accepted_per_forward(self) -> float:
        return self.accepted / self.row_rounds if self.row_rounds else 0.0

    @property
    def tokens_per_forward(self) -> float:
        return self.emitted / self.row_rounds if self.row_rounds else 0.0

    @property
    def mean_k(self) -> float:
        n = sum(self.k_counts.values())
        return sum(k * c for k, c in self.k_counts.items()) / n if n else 0.0

    def merge(self, other: SpecStats) -> None:
        for name in (
            "row_rounds",
            "target_forwards",
            "draft_forwards",
            "drafted",
            "accepted",
            "emitted",
            "seconds",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.k_counts.update(other.k_counts)

    def summary(self) -> str:
        return (
            f"acceptance {self.acceptance_rate:.1%}, {self.accepted_per_forward:.2f} draft tokens accepted "
            f"and {self.tokens_per_forward:.2f} tokens per target forward, mean k {self.mean_k:.2f}"
        )


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens one round emits with ``k`` drafts at per-token acceptance ``alpha``."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def best_k(alpha: float, draft_cost: float, k_max: int) -> int:
    """The k in [1, k_max] with most expected tokens per unit of work (target forward = 1)."""
    scores = [expected_tokens(alpha, k) / (1.0 + draft_cost * k) for k in range(1, k_max + 1)]
    return 1 + int(np.argmax(scores))


class AdaptiveK:
    """One request's draft length: fixed, or chosen from a decayed acceptance estimate.

    Each round is evidence about ``alpha``: ``a`` accepted tokens and one rejection unless all were
    accepted (a geometric sample), so ``alpha = accepted / (accepted + rejections)``; every observed
    token discounts older evidence by ``decay`` (memory of ~1/(1-decay) tokens), and the prior is
    worth two tokens at 0.7.
    """

    def __init__(self, config: SpecConfig, draft_cost: float, decay: float = 0.9) -> None:
        self.config = config
        self.draft_cost = draft_cost
        self.decay = decay
        self.k = config.k
        self.successes = 1.4
        self.trials = 2.0

    @property
    def alpha(self) -> float:
        return self.successes / self.trials

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0 or not self.config.adaptive:
            return
        observed = accepted + (1 if accepted < drafted else 0)
        fade = self.decay**observed
        self.successes = fade * self.successes + accepted
        self.trials = fade * self.trials + observed
        self.k = best_k(self.alpha, self.draft_cost, self.config.k_max)
