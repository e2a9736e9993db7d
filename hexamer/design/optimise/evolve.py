"""Greedy evolution by saturation mutagenesis, and minimal-edit mode on top of it.

Each round scores every allowed single edit of every kept sequence in one batch (the likelihood
term through the shared-prefix scorer of ``hexamer ism``, :mod:`hexamer.design.optimise.likelihood`),
pools them with the kept sequences and keeps the best ``keep``. The kept sequences are in the pool,
so the best objective never goes down; a round that does not raise it ends the run. Every sequence
considered passes the :class:`~hexamer.design.optimise.edits.EditRules` (hard constraints, frozen
positions, edit budget), so every step satisfies every constraint.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hexamer.design.optimise.edits import EditConstraints, EditRules, apply_edit, edits_between
from hexamer.design.optimise.objective import Objective
from hexamer.design.optimise.trajectory import OptimiseResult, Step

__all__ = ["check_count", "evolve", "minimal_edit"]

OnStep = Callable[[Step], None] | None


@dataclass(frozen=True)
class _Member:
    seq: str
    objective: float
    oracle: float
    likelihood: float


def check_count(value: int, name: str, low: int, high: int) -> int:
    """An integer option in ``[low, high]``, else a ValueError naming it."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def _step(i: int, m: _Member, start: str, *, accepted: bool, candidates: int) -> Step:
    return Step(
        i, m.seq, m.objective, m.oracle, m.likelihood, edits_between(start, m.seq), accepted, None, candidates
    )


def _result(best: _Member, start: str, trajectory: list[Step], population: list[_Member]) -> OptimiseResult:
    return OptimiseResult(
        best.seq,
        best.objective,
        best.oracle,
        best.likelihood,
        edits_between(start, best.seq),
        trajectory,
        [m.seq for m in population],
    )


def _children(rules: EditRules, objective: Objective, parent: _Member, seen: set[str]) -> list[_Member]:
    edits = [(p, b) for p, b in rules.single_edits(parent.seq) if apply_edit(parent.seq, p, b) not in seen]
    scores = objective.score_edits(parent.seq, parent.likelihood, edits)
    out = []
    for i, (p, b) in enumerate(edits):
        seq = apply_edit(parent.seq, p, b)
        seen.add(seq)
        out.append(_Member(seq, *scores.row(i)))
    return out


def run_evolution(
    rules: EditRules, objective: Objective, *, keep: int, rounds: int, on_step: OnStep = None
) -> OptimiseResult:
    """:func:`evolve` on checked rules (minimal-edit mode shares it)."""
    start = rules.start
    first = _Member(start, *objective.score([start]).row(0))
    population = [first]
    trajectory = [_step(0, first, start, accepted=True, candidates=0)]
    if on_step is not None:
        on_step(trajectory[0])
    seen = {start}
    for r in range(1, rounds + 1):
        children = [c for m in population for c in _children(rules, objective, m, seen)]
        if not children:
            break
        best_before = population[0]
        # stable sort: on a tie the kept sequence stays ahead of a new one
        population = sorted(population + children, key=lambda m: -m.objective)[:keep]
        improved = population[0].objective > best_before.objective
        step = _step(r, population[0], start, accepted=improved, candidates=len(children))
        trajectory.append(step)
        if on_step is not None:
            on_step(step)
        if not improved:
            break
    return _result(population[0], start, trajectory, population)


def evolve(
    start: str,
    objective: Objective,
    *,
    constraints: EditConstraints | None = None,
    frozen: Iterable[int] = (),
    keep: int = 1,
    rounds: int = 20,
    on_step: OnStep = None,
) -> OptimiseResult:
    """Greedy evolution from ``start``: at most ``rounds`` rounds of all single edits, the best
    ``keep`` kept each round; stops early when a round does not raise the best objective.
    ``frozen``: 0-based positions never edited. ``on_step`` sees each step as it is recorded."""
    check_count(keep, "keep", 1, 10_000)
    check_count(rounds, "rounds", 1, 1_000_000)
    rules = EditRules.make(start, constraints, frozen)
    return run_evolution(rules, objective, keep=keep, rounds=rounds, on_step=on_step)


def _prune(rules: EditRules, objective: Objective, result: OptimiseResult, on_step: OnStep) -> OptimiseResult:
    """Undo edits that the objective does not need (reverting one leaves it at least as high),
    one at a time, best revert first, so the edits left are each worth keeping."""
    start, trajectory = rules.start, result.trajectory
    cur = _Member(result.sequence, result.objective, result.oracle, result.likelihood)
    while True:
        reverts = [
            (e.pos, e.ref)
            for e in edits_between(start, cur.seq)
            if rules.allowed(cur.seq, e.pos, e.ref)
            and rules.constraints.satisfied(apply_edit(cur.seq, e.pos, e.ref))
        ]
        if not reverts:
            break
        scores = objective.score_edits(cur.seq, cur.likelihood, reverts)
        i = int(scores.objective.argmax())
        if scores.objective[i] < cur.objective:
            break
        cur = _Member(apply_edit(cur.seq, *reverts[i]), *scores.row(i))
        step = _step(len(trajectory), cur, start, accepted=True, candidates=len(reverts))
        trajectory.append(step)
        if on_step is not None:
            on_step(step)
    return _result(cur, start, trajectory, [cur])


def minimal_edit(
    start: str,
    objective: Objective,
    *,
    max_edits: int,
    constraints: EditConstraints | None = None,
    frozen: Iterable[int] = (),
    rounds: int | None = None,
    on_step: OnStep = None,
) -> OptimiseResult:
    """The best sequence within ``max_edits`` substitutions of ``start`` that greedy single edits
    reach (``frozen`` positions never edited), then every edit the objective does not need undone.
    ``rounds`` defaults to ``max_edits`` (one new edit per round at most)."""
    check_count(max_edits, "max_edits", 0, len(start))
    n_rounds = check_count(max_edits if rounds is None else rounds, "rounds", 0, 1_000_000)
    rules = EditRules.make(start, constraints, frozen, max_edits)
    if n_rounds == 0:
        first = _Member(start, *objective.score([start]).row(0))
        return _result(first, start, [_step(0, first, start, accepted=True, candidates=0)], [first])
    result = run_evolution(rules, objective, keep=1, rounds=n_rounds, on_step=on_step)
    return _prune(rules, objective, result, on_step)
