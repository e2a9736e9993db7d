"""``check`` and ``allows_edit`` against DNA Chisel and against a full re-check."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.design import DesignConstraints, allows_edit, check, compile_constraints, random_sequence
from tests.design.peer import chisel_failures

SPEC = DesignConstraints(
    60,
    gc=(0.3, 0.7),
    gc_window=12,
    avoid=("GGNCC",),
    avoid_sites=("BsaI", "EcoRI"),
    max_homopolymer=3,
    translate_to="MKLVW",
    prefix="AC",
    cds_start=3,
)


@pytest.mark.parametrize("seed", range(4))
def test_check_agrees_with_chisel(seed: int) -> None:
    """Random bases (most break something): our verdict equals DNA Chisel's, rule by rule."""
    rng = np.random.default_rng(seed)
    cs = compile_constraints(SPEC)
    good = random_sequence(cs, rng)
    assert all(r.passed for r in check(SPEC, good)) and chisel_failures(SPEC, good) == []
    for _ in range(20):
        seq = list(good)
        for pos in rng.choice(60, size=3, replace=False):
            seq[pos] = "ACGT"[rng.integers(4)]
        s = "".join(seq)
        ours = all(r.passed for r in check(SPEC, s))
        assert ours == (chisel_failures(SPEC, s) == []), s


def test_check_measures_values() -> None:
    spec = DesignConstraints(12, gc=(0.0, 1.0), max_homopolymer=5, avoid_sites=("EcoRI",))
    res = {r.name: r for r in check(spec, "GAATTCAAAAAA")}
    assert res["site EcoRI"].value == 1 and not res["site EcoRI"].passed
    assert res["max_homopolymer"].value == 6 and not res["max_homopolymer"].passed
    assert res["gc"].value == pytest.approx(2 / 12, abs=1e-6)


def test_allows_edit_equals_full_check() -> None:
    rng = np.random.default_rng(0)
    cs = compile_constraints(SPEC)
    for _ in range(3):
        seq = random_sequence(cs, rng)
        for pos in range(60):
            for base in "ACGT":
                new = seq[:pos] + base + seq[pos + 1 :]
                full = all(r.passed for r in check(SPEC, new))
                assert allows_edit(SPEC, seq, pos, base) == full, (seq, pos, base)
