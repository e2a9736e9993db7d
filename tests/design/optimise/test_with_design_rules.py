"""Oracle-guided optimisation under the rules of ``hexamer design``: a ``DesignConstraints`` keeps
every step of evolution, annealing and minimal edits within the rules, judged by DNA Chisel."""

from __future__ import annotations

import numpy as np

from hexamer.design import DesignConstraints, SpecEditConstraints, check
from hexamer.design.optimise import MotifCountOracle, Objective, PwmOracle, anneal, evolve, minimal_edit
from tests.design.peer import chisel_failures

SPEC = DesignConstraints(
    length=40, avoid_sites=("EcoRI", "BsaI"), max_homopolymer=3, gc=(0.3, 0.7), gc_window=20
)
START = "ACGTTGCAAGGCTTAACGGAATTATAGCATCGATGCAGTC"


def _steps_ok(result) -> None:
    for step in result.trajectory:
        assert chisel_failures(SPEC, step.sequence) == [], step
        assert all(r.passed for r in check(SPEC, step.sequence))


def test_the_start_meets_the_rules() -> None:
    assert chisel_failures(SPEC, START) == []
    assert SpecEditConstraints(SPEC).satisfied(START)
    assert not SpecEditConstraints(SPEC).satisfied(START[:-1])  # the length is a rule too


def test_evolution_keeps_the_design_rules_while_it_plants_sites() -> None:
    # the oracle rewards GAATTC (EcoRI, forbidden) and GAATTG, each one edit from the start's
    # GAATTA: evolution may only take the second
    oracle = MotifCountOracle("GAATTS")
    result = evolve(START, Objective(oracle), constraints=SpecEditConstraints(SPEC), keep=2, rounds=6)
    assert result.oracle > 0
    assert "GAATTG" in result.sequence and "GAATTC" not in result.sequence
    _steps_ok(result)


def test_annealing_and_minimal_edits_keep_the_design_rules() -> None:
    pwm = PwmOracle.from_counts(np.eye(4)[["ACGT".index(b) for b in "TATAAT"]] * 50)
    rules = SpecEditConstraints(SPEC)
    _steps_ok(anneal(START, Objective(pwm), constraints=rules, steps=60, seed=3))
    result = minimal_edit(START, Objective(pwm), max_edits=3, constraints=rules, frozen={0, 1, 2})
    assert len(result.edits) <= 3 and result.sequence[:3] == START[:3]
    _steps_ok(result)
