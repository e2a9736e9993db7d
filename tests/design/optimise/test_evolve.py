"""Greedy evolution: it finds a planted PWM motif, never lowers the objective, keeps the hard
constraints and frozen positions at every step; the objective's likelihood term is the model's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hexamer.carbon import Carbon
from hexamer.design.optimise import (
    LikelihoodScorer,
    MotifCountOracle,
    Objective,
    PwmOracle,
    evolve,
)
from hexamer.io import reverse_complement
from tests.design.optimise.conftest import GcAndNoRun

MOTIF = "GATTACA"


def _pwm() -> PwmOracle:
    return PwmOracle.from_counts(np.eye(4)[["ACGT".index(b) for b in MOTIF]] * 50)


def test_evolution_finds_the_motif() -> None:
    result = evolve("C" * 30, Objective(_pwm()), rounds=20)
    assert MOTIF in result.sequence or reverse_complement(MOTIF) in result.sequence
    assert len(result.edits) <= len(MOTIF)
    objectives = [s.objective for s in result.trajectory]
    assert objectives == sorted(objectives) and result.objective == objectives[-1]


def test_never_lowers_the_objective_with_the_model_term(tiny_carbon: Carbon) -> None:
    objective = Objective(
        MotifCountOracle("TATA"), likelihood=LikelihoodScorer(tiny_carbon.backend), weight=5.0
    )
    start = "ACGTTGCAAGGCTTAACGGA"
    result = evolve(start, objective, keep=2, rounds=3)
    steps = result.trajectory
    assert len(steps) >= 2 and steps[0].sequence == start
    for before, after in itertools.pairwise(steps):
        assert after.objective >= before.objective
    # every recorded value is the objective of its sequence scored from scratch
    fresh = objective.score([s.sequence for s in steps])
    assert np.allclose(fresh.objective, [s.objective for s in steps], atol=1e-6)
    assert np.allclose(fresh.likelihood, [s.likelihood for s in steps], atol=1e-6)
    assert len(result.population) == 2


def test_constraints_and_frozen_positions_hold_at_every_step() -> None:
    cons = GcAndNoRun(max_gc=0.4, run=2)
    start = "ATATCATATGATATCATATA"
    frozen = {0, 1, 2, 10, 11}
    result = evolve(
        start, Objective(MotifCountOracle("GC")), constraints=cons, frozen=frozen, keep=3, rounds=8
    )
    assert result.oracle > 0
    for step in result.trajectory:
        assert cons.satisfied(step.sequence)
        assert all(step.sequence[p] == start[p] for p in frozen)
    for seq in result.population:
        assert cons.satisfied(seq)


def test_constraints_hold_and_objective_never_drops_with_the_model_term(tiny_carbon: Carbon) -> None:
    """With the packed edit scorer behind the likelihood term: every step keeps the constraints
    and frozen positions, no step lowers the objective, and each recorded objective is its
    sequence's own (scored whole)."""
    cons = GcAndNoRun(max_gc=0.5, run=3)
    start = "ATATCATATGATATCATATAGCTA"  # 24 bp: four full 6-mers
    frozen = {0, 23}
    objective = Objective(
        MotifCountOracle("GC"), likelihood=LikelihoodScorer(tiny_carbon.backend), weight=2.0
    )
    result = evolve(start, objective, constraints=cons, frozen=frozen, keep=2, rounds=3)
    steps = result.trajectory
    for before, after in itertools.pairwise(steps):
        assert after.objective >= before.objective
    for step in steps:
        assert cons.satisfied(step.sequence)
        assert all(step.sequence[p] == start[p] for p in frozen)
    fresh = objective.score([s.sequence for s in steps])
    assert np.allclose(fresh.objective, [s.objective for s in steps], atol=1e-6)


def test_stops_when_nothing_improves() -> None:
    result = evolve("ACGTACGT", Objective(PwmOracle(np.zeros((2, 4)))), rounds=50)
    assert [s.accepted for s in result.trajectory] == [True, False]
    assert result.sequence == "ACGTACGT" and result.edits == ()


@pytest.mark.parametrize(("options", "match"), [({"keep": 0}, "keep"), ({"rounds": 0}, "rounds")])
def test_bad_options(options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        evolve("ACGT", Objective(_pwm()), **options)


def test_objective_checks() -> None:
    with pytest.raises(ValueError, match="LikelihoodScorer"):
        Objective(_pwm(), weight=1.0)
    with pytest.raises(ValueError, match="weight"):
        Objective(_pwm(), weight=-1.0)


def test_evolution_with_a_fine_tuned_head(tmp_path, tiny_carbon: Carbon) -> None:
    from hexamer.design.optimise import HeadOracle
    from hexamer.testing.heads import build_head_folder

    folder = build_head_folder(tmp_path / "head", targets=("a", "b"), zscore=((0.0, 0.0), (1.0, 1.0)))
    oracle = HeadOracle.load(folder, "a", specificity=True)
    objective = Objective(oracle, likelihood=LikelihoodScorer(tiny_carbon.backend), weight=0.1)
    result = evolve("ACGTTGCAAGGCTTAACG", objective, rounds=2)
    assert result.objective > result.trajectory[0].objective
    assert np.allclose(oracle([s.sequence for s in result.trajectory]), [s.oracle for s in result.trajectory])
