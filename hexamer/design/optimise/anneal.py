"""Simulated annealing over single edits: seeded, with a geometric temperature schedule.

Each step proposes one allowed single edit, drawn uniformly (rules checked: hard constraints,
frozen positions, edit budget), and accepts it when it raises the objective or else with
probability ``exp(delta / T)``. The run returns the best sequence it visited; its trajectory holds
the current sequence after every step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from hexamer.design.optimise.edits import BASES, EditConstraints, EditRules, apply_edit, edits_between
from hexamer.design.optimise.evolve import OnStep, check_count
from hexamer.design.optimise.objective import Objective
from hexamer.design.optimise.trajectory import OptimiseResult, Step

__all__ = ["anneal", "temperatures"]

_TRIES = 64  # random draws before falling back to listing every allowed edit


def temperatures(steps: int, t_start: float, t_end: float) -> np.ndarray:
    """The geometric schedule from ``t_start`` down to ``t_end`` over ``steps`` steps."""
    if not (math.isfinite(t_start) and math.isfinite(t_end) and 0 < t_end <= t_start):
        raise ValueError(f"temperatures must satisfy 0 < t_end <= t_start (finite), got {t_start}, {t_end}")
    if steps == 1:
        return np.array([t_start])
    return t_start * (t_end / t_start) ** (np.arange(steps) / (steps - 1))


def _propose(rules: EditRules, seq: str, rng: np.random.Generator) -> tuple[int, str] | None:
    for _ in range(_TRIES):
        pos, base = int(rng.integers(len(seq))), BASES[int(rng.integers(4))]
        if rules.allowed(seq, pos, base) and rules.constraints.satisfied(apply_edit(seq, pos, base)):
            return pos, base
    edits = rules.single_edits(seq)
    return edits[int(rng.integers(len(edits)))] if edits else None


def anneal(
    start: str,
    objective: Objective,
    *,
    steps: int = 1000,
    t_start: float = 1.0,
    t_end: float = 0.01,
    seed: int = 0,
    constraints: EditConstraints | None = None,
    frozen: Iterable[int] = (),
    max_edits: int | None = None,
    on_step: OnStep = None,
) -> OptimiseResult:
    """Anneal from ``start`` for ``steps`` proposals; the same ``seed`` gives the same run."""
    check_count(steps, "steps", 1, 10_000_000)
    check_count(seed, "seed", 0, 2**63 - 1)
    schedule = temperatures(steps, t_start, t_end)
    rules = EditRules.make(start, constraints, frozen, max_edits)
    rng = np.random.default_rng(seed)
    cur_seq = start
    cur = objective.score([start]).row(0)
    best_seq, best = cur_seq, cur
    trajectory = [Step(0, start, *cur, (), True, None, 0)]
    if on_step is not None:
        on_step(trajectory[0])
    for i, temp in enumerate(schedule, start=1):
        edit = _propose(rules, cur_seq, rng)
        if edit is None:
            break
        new = objective.score_edits(cur_seq, cur[2], [edit]).row(0)
        delta = new[0] - cur[0]
        accepted = delta >= 0 or rng.random() < math.exp(delta / temp)
        if accepted:
            cur_seq, cur = apply_edit(cur_seq, *edit), new
            if cur[0] > best[0]:
                best_seq, best = cur_seq, cur
        step = Step(i, cur_seq, *cur, edits_between(start, cur_seq), accepted, float(temp), 1)
        trajectory.append(step)
        if on_step is not None:
            on_step(step)
    return OptimiseResult(best_seq, *best, edits_between(start, best_seq), trajectory, [best_seq])
