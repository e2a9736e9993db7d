"""Edit rules: frozen positions, the edit budget and the constraint set decide which edits exist."""

from __future__ import annotations

import pytest

from hexamer.design.optimise import Edit, EditConstraints, EditRules, NoConstraints
from hexamer.design.optimise.edits import edits_between, hamming
from tests.design.optimise.conftest import GcAndNoRun


def test_all_single_edits_without_rules() -> None:
    rules = EditRules.make("ACGT")
    edits = rules.single_edits("ACGT")
    assert len(edits) == 12 and all(b != "ACGT"[p] for p, b in edits)


def test_frozen_positions_and_budget() -> None:
    rules = EditRules.make("AAAAAA", frozen=[0, 5], max_edits=1)
    edits = rules.single_edits("AAAAAA")
    assert {p for p, _ in edits} == {1, 2, 3, 4}
    # one edit spent: only edits that move the spent one, or revert it, stay in budget
    later = rules.single_edits("ACAAAA")
    assert set(later) == {(1, "A"), (1, "G"), (1, "T")}


def test_constraints_are_asked_and_kept() -> None:
    cons = GcAndNoRun(max_gc=0.5, run=2)
    assert isinstance(cons, EditConstraints) and isinstance(NoConstraints(), EditConstraints)
    rules = EditRules.make("ACATAC", cons)
    edits = rules.single_edits("ACATAC")
    assert cons.asked > 0 and edits
    for p, b in edits:
        assert cons.satisfied("ACATAC"[:p] + b + "ACATAC"[p + 1 :])


@pytest.mark.parametrize(
    ("start", "options", "match"),
    [
        ("", {}, "non-empty"),
        ("ACGN", {}, "A/C/G/T"),
        ("ACGT", {"frozen": [4]}, "outside"),
        ("ACGT", {"max_edits": -1}, "max_edits"),
        ("GGGG", {"constraints": GcAndNoRun()}, "does not satisfy"),
    ],
)
def test_bad_rules(start: str, options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        EditRules.make(start, **options)


def test_edit_records() -> None:
    assert edits_between("ACGT", "ACCA") == (Edit(2, "G", "C"), Edit(3, "T", "A"))
    assert str(Edit(2, "G", "C")) == "G3C" and hamming("ACGT", "ACCA") == 2
