"""Simulated annealing: seeded (same seed, same run), the schedule is geometric, constraints,
frozen positions and the budget hold at every step, and the best visited sequence is returned."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.carbon import Carbon
from hexamer.design.optimise import LikelihoodScorer, MotifCountOracle, Objective, anneal, temperatures
from hexamer.design.optimise.edits import hamming
from tests.design.optimise.conftest import GcAndNoRun

START = "ATATTATAATATTATAATATTATA"


def test_same_seed_same_run() -> None:
    objective = Objective(MotifCountOracle("GC"))
    a = anneal(START, objective, steps=200, seed=4)
    b = anneal(START, objective, steps=200, seed=4)
    c = anneal(START, objective, steps=200, seed=5)
    assert [s.sequence for s in a.trajectory] == [s.sequence for s in b.trajectory]
    assert [s.sequence for s in a.trajectory] != [s.sequence for s in c.trajectory]
    assert a.objective == max(s.objective for s in a.trajectory) and a.objective > 0


def test_rules_hold_at_every_step() -> None:
    cons = GcAndNoRun(max_gc=0.35, run=2)
    frozen = {0, 5, 6, 7}
    result = anneal(
        START,
        Objective(MotifCountOracle("GC")),
        steps=300,
        seed=1,
        constraints=cons,
        frozen=frozen,
        max_edits=6,
    )
    for step in result.trajectory:
        assert cons.satisfied(step.sequence) and hamming(START, step.sequence) <= 6
        assert all(step.sequence[p] == START[p] for p in frozen)
    temps = [s.temperature for s in result.trajectory[1:]]
    assert temps == sorted(temps, reverse=True)


def test_with_the_model_term(tiny_carbon: Carbon) -> None:
    objective = Objective(
        MotifCountOracle("TA"), likelihood=LikelihoodScorer(tiny_carbon.backend), weight=1.0
    )
    result = anneal(START[:18], objective, steps=12, seed=0)
    fresh = objective.score([s.sequence for s in result.trajectory])
    assert np.allclose(fresh.objective, [s.objective for s in result.trajectory], atol=1e-6)


def test_schedule_and_bad_options() -> None:
    t = temperatures(5, 1.0, 0.0625)
    assert np.allclose(t, [1.0, 0.5, 0.25, 0.125, 0.0625])
    with pytest.raises(ValueError, match="t_end"):
        temperatures(5, 0.1, 1.0)
    with pytest.raises(ValueError, match="steps"):
        anneal(START, Objective(MotifCountOracle("A")), steps=0)
    with pytest.raises(ValueError, match="seed"):
        anneal(START, Objective(MotifCountOracle("A")), seed=-1)
