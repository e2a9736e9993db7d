"""``hexamer bench design-evolve`` in Python: one round of greedy evolution (every single edit of a
sequence scored by ``oracle + weight · log-likelihood per base``) with the shared-prefix likelihood
scorer against scoring each candidate with its own forward.

Both sides score the same candidates with the same objective, so their scores must agree to
rounding (``max_abs_diff``, on the objective); the ratio is what sharing buys: the edits inside one
6-mer run the tokens before it once, and the candidates' tails run in batches. The two are timed in
alternating order round after round, after an untimed warm-up of each; medians are reported.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.common import BenchOptionError, gc_paused
from hexamer.bench.report import BenchReport

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["run_design_evolve_bench"]

#: the oracle of the benchmark: a 6-bp PWM (its cost is the same on both sides and small)
_PWM_COUNTS = np.eye(4)[[0, 1, 2, 3, 0, 1]] * 10


def _check(length: int, rounds: int, batch_size: int, token_budget: int, weight: float) -> None:
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


def run_design_evolve_bench(
    carbon: Carbon,
    *,
    model_name: str,
    length: int = 200,
    rounds: int = 3,
    batch_size: int = 64,
    token_budget: int = 16384,
    weight: float = 1.0,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> BenchReport:
    """Time one evolution round over all ``3 · length`` single edits of a seeded random sequence,
    shared-prefix scorer vs one forward per candidate, ``rounds`` times in alternating order."""
    from hexamer.design.optimise import EditRules, LikelihoodScorer, Objective, PwmOracle

    _check(length, rounds, batch_size, token_budget, weight)
    rng = np.random.default_rng(seed)
    parent = "".join(rng.choice(list("ACGT"), length))
    oracle = PwmOracle.from_counts(_PWM_COUNTS)
    sides = {
        "shared prefix": LikelihoodScorer(carbon.backend, batch_size=batch_size, token_budget=token_budget),
        "one forward each": LikelihoodScorer(carbon.backend, shared=False),
    }
    objectives = {name: Objective(oracle, likelihood=s, weight=weight) for name, s in sides.items()}
    rules = EditRules.make(parent)
    ll = sides["one forward each"].per_base([parent])[0]

    def one_round(name: str) -> tuple[float, np.ndarray]:
        t0 = time.perf_counter()
        edits = rules.single_edits(parent)
        scores = objectives[name].score_edits(parent, ll, edits)
        return time.perf_counter() - t0, scores.objective

    for name in sides:  # warm-up: kernels, caches, allocator
        objectives[name].score_edits(parent, ll, rules.single_edits(parent)[: 3 * 12])
    times: dict[str, list[float]] = {name: [] for name in sides}
    values: dict[str, np.ndarray] = {}
    order = list(sides)
    with gc_paused():
        for r in range(rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                seconds, values[name] = one_round(name)
                times[name].append(seconds)
                if log is not None:
                    log(f"round {r + 1}/{rounds}: {name} {seconds:.2f} s")
    n = len(values["shared prefix"])
    diff = float(np.abs(values["shared prefix"] - values["one forward each"]).max())
    ratios = [b / a for a, b in zip(times["shared prefix"], times["one forward each"], strict=True)]
    base = statistics.median(times["one forward each"])
    rows: list[dict[str, Any]] = []
    for name in sides:
        med = statistics.median(times[name])
        rows.append(
            {
                "method": name,
                "candidates": n,
                "round s": med,
                "candidates/s": n / med,
                "speedup": base / med,
                "max_abs_diff": diff,
            }
        )
    report = BenchReport(
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
        notes=[
            f"objective = 6-bp PWM (both strands) + {weight:g} · FNS log-likelihood per base; "
            f"device {carbon.backend.device}",
            "per-round ratios (alternating order): " + ", ".join(f"{x:.2f}×" for x in ratios),
            f"batch_size={batch_size}, token_budget={token_budget}, seed={seed}, rounds={rounds}",
        ],
    )
    return report
