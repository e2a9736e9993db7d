"""Timing rounds that can be trusted: warm-up, alternating order, several rounds, the spread shown.

A single timed run on a shared machine can be off by 10× (another process, a first-call
allocation, a page fault storm): quick benchmarks once printed a 58× speed-up and a +16,512%
overhead. Every comparison here runs each case once untimed (warm-up), then ``rounds`` rounds
(at least :data:`MIN_ROUNDS`) whose order alternates (A B, B A, ...), and reports min / median /
max per case. :func:`spread_warning` says in plain words when the rounds disagree too much for
the ratios to mean anything.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hexamer.bench.common import gc_paused

__all__ = [
    "MAX_TRUSTED_SPREAD",
    "MIN_ROUNDS",
    "Timing",
    "best_of",
    "put_spread_warning_first",
    "run_rounds",
    "spread_warning",
]

#: fewest timed rounds per case: a median and a spread need three
MIN_ROUNDS = 3
#: (max - min) / median above which a case's figures are flagged as untrustworthy
MAX_TRUSTED_SPREAD = 0.25


@dataclass
class Timing:
    """The seconds of every timed round of one case, and the result of its last run."""

    seconds: list[float] = field(default_factory=list)
    result: Any = None

    @property
    def min(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)

    @property
    def spread(self) -> float:
        """(max - min) / median: 0.1 means the rounds differ by 10% of a typical round."""
        return (self.max - self.min) / self.median if self.median > 0 else float("inf")

    def summary(self) -> str:
        """``0.120 / 0.130 / 0.150`` (min / median / max seconds)."""
        return f"{self.min:.3g} / {self.median:.3g} / {self.max:.3g}"

    def as_dict(self) -> dict[str, float | int]:
        return {
            "seconds_min": self.min,
            "seconds_median": self.median,
            "seconds_max": self.max,
            "rounds": len(self.seconds),
        }


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    with gc_paused():  # as timeit does; collected once per round instead
        start = time.perf_counter()
        result = fn()
        return time.perf_counter() - start, result


def best_of(
    fn: Callable[[], Any], repeats: int, *, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, Any]:
    """``(seconds, result)``: the fastest of ``max(1, repeats)`` runs of ``fn`` and the result of
    the last run. No warm-up and no alternation: for a case timed on its own, or a peer whose
    first run is part of its cost; comparisons use :func:`run_rounds`."""
    best = math.inf
    result = None
    for _ in range(max(1, repeats)):
        start = clock()
        result = fn()
        best = min(best, clock() - start)
    return best, result


def run_rounds(
    cases: Mapping[str, Callable[[], Any]],
    rounds: int = MIN_ROUNDS,
    *,
    warmup: int = 1,
    log: Callable[[str], None] | None = None,
) -> dict[str, Timing]:
    """Time every case ``max(rounds, MIN_ROUNDS)`` times after ``warmup`` untimed runs each; the
    order alternates between rounds (A B C, C B A, ...) so a slow stretch of the machine does not
    always hit the same case."""
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    out = {name: Timing() for name in names}
    n = max(int(rounds), MIN_ROUNDS)
    for r in range(n):
        gc.collect()
        for name in names if r % 2 == 0 else reversed(names):
            seconds, result = _timed(cases[name])
            out[name].seconds.append(seconds)
            out[name].result = result
            if log is not None:
                log(f"round {r + 1}/{n}: {name} {seconds:.3g} s")
    return out


def spread_warning(timings: Mapping[str, Timing], limit: float = MAX_TRUSTED_SPREAD) -> str | None:
    """A plain warning naming the cases whose rounds differ by more than ``limit`` of their
    median, or None when every case is steady enough to compare."""
    bad = {name: t for name, t in timings.items() if t.seconds and t.spread > limit}
    if not bad:
        return None
    worst = ", ".join(f"{name} {t.spread:.0%}" for name, t in bad.items())
    return (
        f"WARNING: timings are not steady enough to trust (rounds differ by {worst} of their median, "
        f"more than {limit:.0%}): the machine is busy or the runs are too short. Re-run with more "
        "--repeats, a larger workload (no --quick) or on an idle machine before quoting these ratios."
    )


def put_spread_warning_first(notes: list[str], timings: Mapping[str, Timing]) -> None:
    """Insert :func:`spread_warning` at the top of a report's ``notes`` when the rounds disagree,
    so it is read before any ratio."""
    if (warning := spread_warning(timings)) is not None:
        notes.insert(0, warning)
