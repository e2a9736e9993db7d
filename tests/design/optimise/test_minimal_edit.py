"""Minimal-edit mode: at most K edits from the start, frozen positions untouched, and no edit the
objective does not need."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.design.optimise import CallableOracle, MotifCountOracle, Objective, minimal_edit
from hexamer.design.optimise.edits import hamming
from tests.design.optimise.conftest import GcAndNoRun


@pytest.mark.parametrize("budget", [0, 1, 2, 4])
def test_budget_and_frozen_positions(budget: int) -> None:
    start = "ATATATATATATATATATAT"
    frozen = set(range(0, 20, 3))
    oracle = CallableOracle(lambda seqs: [s.count("G") for s in seqs])
    result = minimal_edit(start, Objective(oracle), max_edits=budget, frozen=frozen)
    for step in result.trajectory:
        assert hamming(start, step.sequence) <= budget
        assert all(step.sequence[p] == start[p] for p in frozen)
    assert len(result.edits) == budget and result.oracle == budget


def _staged(seq: str) -> float:
    """G at 0 pays first; G at 10 and 11 together pay more, and make the G at 0 worthless."""
    a, b, c = seq[0] == "G", seq[10] == "G", seq[11] == "G"
    return 1.0 * a + 0.9 * b + 0.95 * c + 3.0 * (b and c) - 1.0 * (a and b and c)


def test_unneeded_edits_are_undone() -> None:
    start = "T" * 20
    oracle = CallableOracle(lambda seqs: [_staged(s) for s in seqs])
    result = minimal_edit(start, Objective(oracle), max_edits=3)
    # greedy takes G1 first, then G12 and G11; G1 no longer pays and is undone
    edits = [sorted(str(e) for e in s.edits) for s in result.trajectory]
    assert edits[1:] == [["T1G"], ["T12G", "T1G"], ["T11G", "T12G", "T1G"], ["T11G", "T12G"]]
    assert [str(e) for e in result.edits] == ["T11G", "T12G"]
    assert result.objective == pytest.approx(4.85)


def test_constraints_hold_within_the_budget() -> None:
    cons = GcAndNoRun(max_gc=0.3, run=3)
    start = "ATATTATAATATTATAATAT"
    result = minimal_edit(start, Objective(MotifCountOracle("C")), max_edits=10, constraints=cons)
    assert all(cons.satisfied(s.sequence) for s in result.trajectory)
    assert 0 < len(result.edits) <= 10 and np.isclose(
        result.oracle, result.sequence.count("C") + result.sequence.count("G")
    )


def test_bad_budget() -> None:
    with pytest.raises(ValueError, match="max_edits"):
        minimal_edit("ACGT", Objective(MotifCountOracle("A")), max_edits=5)
