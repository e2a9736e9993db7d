"""``hexamer bench design-evolve`` in Python: one round of greedy evolution (every single edit of a
sequence scored by ``oracle + weight · log-likelihood per base``) with the shared-prefix likelihood
scorer against scoring each candidate with its own forward.

The reference ("one forward each") is one batch-1 forward per edited sequence on the same model,
with the same per-position FNS arithmetic (:func:`~hexamer.design.optimise.edit_scores.one_forward_each`),
so the ratio is only what sharing and batching buy; ``stock=True`` adds a third side through the
library's own per-sequence scorer (``Backend.window_log_likelihoods``, float64 FNS). Every side
scores the same candidates with the same objective, so their scores must agree to rounding
(``max_abs_diff``, on the objective against the reference). The sides are timed in alternating
order round after round, after an untimed warm-up of each; medians are reported. On a slow machine
``reference_sample`` times the reference side(s) on a seeded sample of the candidates and scales
the time to all of them (the diff is then over the sample).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.common import BenchOptionError, gc_paused
from hexamer.bench.report import BenchReport
from hexamer.design.optimise import EditRules, LikelihoodScorer, Objective, PwmOracle
from hexamer.design.optimise.edits import apply_edit

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["run_design_evolve_bench"]

#: the oracle of the benchmark: a 6-bp PWM (its cost is the same on both sides and small)
_PWM_COUNTS = np.eye(4)[[0, 1, 2, 3, 0, 1]] * 10
_SHARED, _REFERENCE, _STOCK = "shared prefix", "one forward each", "one forward each (stock scorer)"


def _check(length: int, rounds: int, batch_size: int, token_budget: int, weight: float, sample: int) -> None:
    if not 12 <= length <= 100_000:
        raise BenchOptionError(f"--length must be in 12..100000, got {length}")
    if not 3 <= rounds <= 1000:
        raise BenchOptionError(f"--rounds must be in 3..1000, got {rounds}")
    if not 1 <= batch_size <= 65536:
        raise BenchOptionError(f"--batch-size must be in 1..65536, got {batch_size}")
    if not 64 <= token_budget <= 1 << 24:
        raise BenchOptionError(f"--token-budget must be in 64..{1 << 24}, got {token_budget}")
    if not 0 < weight < 1e6:
        raise BenchOptionError(f"--weight must be in (0, 1e6), got {weight}")
    if not 0 <= sample <= 300_000:
        raise BenchOptionError(f"--reference-sample must be in 0..300000 (0: all), got {sample}")


class _StockScorer(LikelihoodScorer):
    """Each edited sequence whole through ``Backend.window_log_likelihoods`` (float64 FNS)."""

    def edits_per_base(
        self, parent: str, parent_per_base: float, edits: Sequence[tuple[int, str]]
    ) -> np.ndarray:
        return self.per_base([apply_edit(parent, p, b) for p, b in edits])


def _token_notes(length: int, k: int, edits: Sequence[tuple[int, str]]) -> str:
    """The forward tokens each side runs: the exact bound on what sharing saves."""
    n_tokens = -(-length // k)
    tails = sum(n_tokens - 1 - p // k for p, _ in edits)
    each = len(edits) * n_tokens
    return (
        f"tokens run: shared {n_tokens + tails:,} (parent {n_tokens} + tails {tails:,}), "
        f"one forward each {each:,}: {each / (n_tokens + tails):.2f}× fewer (the exact bound)"
    )


def run_design_evolve_bench(
    carbon: Carbon,
    *,
    model_name: str,
    length: int = 200,
    rounds: int = 3,
    batch_size: int = 4096,
    token_budget: int = 2048,
    weight: float = 1.0,
    seed: int = 0,
    reference_sample: int = 0,
    stock: bool = False,
    log: Callable[[str], None] | None = None,
) -> BenchReport:
    """Time one evolution round over all ``3 · length`` single edits of a seeded random sequence,
    shared-prefix scorer vs one batch-1 forward per candidate, ``rounds`` times in alternating
    order. ``reference_sample`` > 0: the reference side(s) score that many seeded candidates."""
    _check(length, rounds, batch_size, token_budget, weight, reference_sample)
    rng = np.random.default_rng(seed)
    parent = "".join(rng.choice(list("ACGT"), length))
    oracle = PwmOracle.from_counts(_PWM_COUNTS)
    sides = {
        _SHARED: LikelihoodScorer(carbon.backend, batch_size=batch_size, token_budget=token_budget),
        _REFERENCE: LikelihoodScorer(carbon.backend, shared=False),
    }
    if stock:
        sides[_STOCK] = _StockScorer(carbon.backend, shared=False)
    objectives = {name: Objective(oracle, likelihood=s, weight=weight) for name, s in sides.items()}
    rules = EditRules.make(parent)
    all_edits = rules.single_edits(parent)
    n = len(all_edits)
    pick = np.arange(n)
    if 0 < reference_sample < n:
        pick = np.sort(np.random.default_rng(seed + 1).choice(n, reference_sample, replace=False))
    ll = sides[_REFERENCE].per_base([parent])[0]

    def one_round(name: str) -> tuple[float, float, np.ndarray]:
        t0, c0 = time.perf_counter(), time.process_time()
        edits = rules.single_edits(parent)
        if name != _SHARED:
            edits = [edits[i] for i in pick]
        scores = objectives[name].score_edits(parent, ll, edits)
        scale = n / len(edits)
        return (time.perf_counter() - t0) * scale, (time.process_time() - c0) * scale, scores.objective

    for name in sides:  # warm-up: kernels, caches, allocator
        objectives[name].score_edits(parent, ll, all_edits[: 3 * 12])
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    values: dict[str, np.ndarray] = {}
    order = list(sides)
    with gc_paused():
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                seconds, cpu_seconds, values[name] = one_round(name)
                times[name].append(seconds)
                cpu[name].append(cpu_seconds)
                if log is not None:
                    log(f"round {r + 1}/{rounds}: {name} {seconds:.2f} s")
    base = statistics.median(times[_REFERENCE])
    rows: list[dict[str, Any]] = []
    for name in sides:
        med = statistics.median(times[name])
        mine = values[name][pick] if name == _SHARED else values[name]
        rows.append(
            {
                "method": name,
                "candidates": n,
                "round s": med,
                "candidates/s": n / med,
                "speedup": base / med,
                "max_abs_diff": float(np.abs(mine - values[_REFERENCE]).max()),
            }
        )
    ratios = [b / a for a, b in zip(times[_SHARED], times[_REFERENCE], strict=True)]
    notes = [
        f"objective = 6-bp PWM (both strands) + {weight:g} · FNS log-likelihood per base; "
        f"device {carbon.backend.device}",
        "reference: one batch-1 forward per candidate, same model, same FNS arithmetic",
        "per-round ratios (alternating order): " + ", ".join(f"{x:.2f}×" for x in ratios),
        "CPU seconds of this process (less disturbed by other jobs than wall time): "
        + ", ".join(f"{name} {statistics.median(cpu[name]):.3f}" for name in sides)
        + f"; ratio {statistics.median(cpu[_REFERENCE]) / statistics.median(cpu[_SHARED]):.2f}×",
        _token_notes(length, carbon.backend.layout.k, all_edits),
        f"batch_size={batch_size}, token_budget={token_budget}, seed={seed}, rounds={rounds}",
    ]
    if len(pick) < n:
        notes.append(
            f"reference side(s) timed on a seeded sample of {len(pick)} of {n} candidates, scaled to "
            f"all; max_abs_diff over the sample"
        )
    return BenchReport(
        name="design-evolve",
        title=f"One evolution round: all {n} single edits of a {length}-bp sequence ({model_name})",
        columns=["method", "candidates", "round s", "candidates/s", "speedup", "max_abs_diff"],
        rows=rows,
        formats={
            "round s": "{:,.3f}",
            "candidates/s": "{:,.0f}",
            "speedup": "{:.2f}×",
            "max_abs_diff": "{:.1e}",
        },
        notes=notes,
    )
