"""Track formulas checked against a direct computation, and NaN (absent) where a base is unscored."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hexamer.tracks import KINDS, parse_kinds, track_names, track_values


def _lp(rows: list[list[float]]) -> np.ndarray:
    p = np.asarray(rows, dtype=np.float64)
    return np.log(p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def test_formulas_and_signs() -> None:
    lp = _lp([[0.7, 0.1, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]])
    v = track_values(lp, "AgT", ["logprob", "prob", "entropy", "llr"])
    assert set(v) == set(track_names(KINDS))
    for j, b in enumerate("ACGT"):
        np.testing.assert_array_equal(v[f"logprob_{b}"], lp[:, j])
        np.testing.assert_allclose(v[f"prob_{b}"], np.exp(lp[:, j].astype(np.float64)), rtol=1e-6)
    np.testing.assert_allclose(v["logprob_ref"], [lp[0, 0], lp[1, 2], lp[2, 3]], rtol=1e-6)
    p = np.exp(lp.astype(np.float64))
    np.testing.assert_allclose(v["entropy"], -(p * np.log2(p)).sum(axis=1), rtol=1e-5)
    assert v["entropy"][1] == pytest.approx(2.0, abs=1e-5)  # uniform = 2 bits
    # the reference A is the favourite at row 0: mean alt LLR < 0
    assert v["llr"][0] == pytest.approx(math.log(0.1 / 0.7), rel=1e-5) and v["llr"][0] < 0
    assert v["llr"][1] == pytest.approx(0.0, abs=1e-6)
    expected = np.mean([math.log(x / 0.4) for x in (0.1, 0.2, 0.3)])
    assert v["llr"][2] == pytest.approx(expected, rel=1e-5)
    assert all(a.dtype == np.float32 for a in v.values())


def test_unscored_bases_are_nan_in_every_track() -> None:
    lp = _lp([[0.7, 0.1, 0.1, 0.1]] * 3)
    lp[1] = np.nan
    v = track_values(lp, "ANR", list(KINDS))
    for name, values in v.items():
        assert not np.isnan(values[0]), name
        assert np.isnan(values[1]) and np.isnan(values[2]), name


def test_kinds_are_validated() -> None:
    assert parse_kinds("llr, logprob,llr") == ("llr", "logprob")
    with pytest.raises(ValueError, match="subset of logprob, prob, entropy, llr"):
        parse_kinds("logprob,bogus")
    with pytest.raises(ValueError):
        parse_kinds(" , ")
