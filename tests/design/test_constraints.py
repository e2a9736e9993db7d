"""Every sequence drawn under random constraint sets meets them, judged by DNA Chisel; unsatisfiable
sets are named before decoding; the GC lookahead is exact (brute force on short sequences)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hexamer.design import (
    DesignConstraints,
    Partial,
    UnsatisfiableError,
    check,
    compile_constraints,
    random_sequence,
)
from tests.design.peer import chisel_failures

ENZYMES = ["BsaI", "BsmBI", "BbsI", "SapI", "EcoRI", "BamHI", "XhoI", "NotI", "HindIII", "NcoI"]
AMINO = "ACDEFGHIKLMNPQRSTVWY"


@st.composite
def constraint_sets(draw: st.DrawFn) -> DesignConstraints:
    n = draw(st.integers(12, 90))
    prefix = draw(st.text("ACGT", max_size=6))
    suffix = draw(st.text("ACGT", max_size=min(6, n - len(prefix))))
    gc = window = None
    if draw(st.booleans()):
        lo = draw(st.sampled_from([0.0, 0.2, 0.3, 0.4, 0.5]))
        gc = (lo, min(1.0, lo + draw(st.sampled_from([0.1, 0.2, 0.3, 0.5]))))
        if draw(st.booleans()):
            window = draw(st.integers(4, n))
    protein = None
    room = (n - len(prefix) - len(suffix)) // 3
    if room >= 1 and draw(st.booleans()):
        protein = draw(st.text(AMINO, min_size=1, max_size=min(room, 20)))
    return DesignConstraints(
        n,
        prefix=prefix,
        suffix=suffix,
        avoid=tuple(draw(st.lists(st.text("ACGTRYSWN", min_size=3, max_size=6), max_size=2))),
        avoid_sites=tuple(draw(st.lists(st.sampled_from(ENZYMES), max_size=4, unique=True))),
        max_homopolymer=draw(st.none() | st.integers(2, 5)),
        gc=gc,
        gc_window=window,
        translate_to=protein,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=constraint_sets(), seed=st.integers(0, 2**32 - 1))
def test_random_constraint_sets_hold_under_peer(spec: DesignConstraints, seed: int) -> None:
    try:
        cs = compile_constraints(spec)
    except UnsatisfiableError as exc:
        assert exc.constraint and str(exc).startswith("constraints cannot be met")
        return
    rng = np.random.default_rng(seed)
    for seq in [cs.witness(), *(random_sequence(cs, rng) for _ in range(3))]:
        assert chisel_failures(spec, seq) == [], (spec, seq)
        assert all(r.passed for r in check(spec, seq)), (spec, seq)


def _brute_gc_ok(
    prefix: list[int], sets: list[set[int]], total: tuple[int, int], w: int, window: tuple[int, int]
) -> bool:
    """Some completion of the G/C bit string meets the count bounds in the whole and every window."""
    n = len(sets)
    for rest in itertools.product((0, 1), repeat=n - len(prefix)):
        bits = [*prefix, *rest]
        if any(b not in sets[i] for i, b in enumerate(bits)) or not total[0] <= sum(bits) <= total[1]:
            continue
        if all(window[0] <= sum(bits[s : s + w]) <= window[1] for s in range(n - w + 1)):
            return True
    return False


def _counts(lo: float, hi: float, n: int) -> tuple[int, int]:
    return int(np.ceil(lo * n - 1e-9)), int(np.floor(hi * n + 1e-9))


@pytest.mark.parametrize("seed", range(6))
def test_gc_lookahead_is_exact(seed: int) -> None:
    """At every step of every short sequence, the allowed G/C choices are exactly those that some
    completion can still satisfy (brute force over all completions)."""
    rng = np.random.default_rng(seed)
    n, w = 12, int(rng.integers(3, 8))
    mask = "".join(rng.choice(list("NNNNNSW"), size=n))
    spec = DesignConstraints(n, mask=mask, gc=(0.34, 0.67), gc_window=w)
    sets = [{0, 1} if c == "N" else ({1} if c == "S" else {0}) for c in mask]
    total, window = _counts(0.34, 0.67, n), _counts(0.34, 0.67, w)
    if not _brute_gc_ok([], sets, total, w, window):
        with pytest.raises(UnsatisfiableError):
            compile_constraints(spec)
        return
    cs = compile_constraints(spec)
    p, prefix = Partial(n), []
    for _ in range(n):
        bits = cs.allowed(p)
        for g in (0, 1):
            allowed = bool(bits & (0b1100 if g else 0b0011))
            assert allowed == _brute_gc_ok([*prefix, g], sets, total, w, window), (mask, prefix, g)
        g = int(rng.choice([g for g in (0, 1) if bits & (0b1100 if g else 0b0011)]))
        prefix.append(g)
        p.push(3 if g else 0)


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        (dict(length=20, prefix="GGTCTCA", avoid_sites=("BsaI",)), "site BsaI"),
        (dict(length=20, suffix="GAGACC", avoid_sites=("BsaI",)), "site BsaI"),
        (dict(length=20, mask="AAAAA", max_homopolymer=4), "max_homopolymer"),
        (dict(length=10, prefix="GGGGGG", gc=(0.0, 0.5)), "gc"),
        (dict(length=20, mask="S" * 12, gc=(0.2, 0.8), gc_window=5), "gc window"),
        (dict(length=20, gc=(0.41, 0.44)), "gc"),
        (dict(length=9, mask="SSS", translate_to="MKV"), "translate_to"),
        (dict(length=12, gc=(0.0, 0.1), translate_to="GGGG"), "gc"),
        (dict(length=30, avoid=("A", "C")), "avoid A + avoid C"),
    ],
)
def test_unsatisfiable_sets_are_named_before_decoding(spec: dict, name: str) -> None:
    with pytest.raises(UnsatisfiableError) as err:
        compile_constraints(DesignConstraints(**spec))
    assert name in err.value.constraint


def test_combination_found_unsatisfiable_by_search() -> None:
    """Each rule alone can hold, together they cannot: the pre-decoding search names them all."""
    spec = DesignConstraints(12, avoid=("A", "CGC"), max_homopolymer=1)
    with pytest.raises(UnsatisfiableError) as err:
        compile_constraints(spec)
    assert "max_homopolymer" in err.value.constraint
