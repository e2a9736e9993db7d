"""Result types: a mean that is not a finite number is never an ``ok`` result."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hexamer.backend.results import (
    FailedResultWarning,
    ScoreResult,
    UnscoredSequenceWarning,
    checked_base_logprobs,
    warn_unscored,
)
from hexamer.model.finite import NonFiniteOutputError


@pytest.mark.parametrize("mean", [math.nan, math.inf])
def test_a_nan_or_inf_mean_is_failed_with_no_sum(mean: float) -> None:
    r = ScoreResult(mean=mean, n_scored=3, n_oov_bases=0, per_base=np.full(3, np.nan, dtype=np.float32))
    assert r.status == "failed" and "non-finite log-probability" in (r.reason or "")
    assert math.isnan(r.mean) and math.isnan(r.sum)  # never the 0.0 of an empty nansum


def test_minus_inf_from_a_served_top_n_is_failed_and_kept() -> None:
    r = ScoreResult(mean=-math.inf, n_scored=2, n_oov_bases=0)
    assert r.status == "failed" and r.mean == -math.inf and "top-N" in (r.reason or "")


def test_ok_and_unscored_results_are_unchanged() -> None:
    ok = ScoreResult(mean=-1.2, n_scored=2, n_oov_bases=0, per_base=np.array([-1.0, -1.4], dtype=np.float32))
    assert ok.status == "ok" and ok.reason is None and ok.sum == pytest.approx(-2.4)
    assert ScoreResult(mean=math.nan, n_scored=0, n_oov_bases=6).status == "unscored"


def test_failed_and_unscored_results_warn_apart() -> None:
    results = [
        ScoreResult(mean=-1.0, n_scored=1, n_oov_bases=0),
        ScoreResult(mean=math.nan, n_scored=4, n_oov_bases=0),
        ScoreResult(mean=math.nan, n_scored=0, n_oov_bases=6),
    ]
    with (
        pytest.warns(FailedResultWarning, match=r"1 of 3 results failed \(non-finite .*sequence 1$"),
        pytest.warns(UnscoredSequenceWarning, match=r"no scorable base.*sequence 2$"),
    ):
        warn_unscored(results, stacklevel=1)


def test_checked_base_logprobs_refuses_nan_rows_of_scored_bases_only() -> None:
    lp = np.log(np.full((12, 4), 0.25, dtype=np.float32))
    n_real = np.array([6, 0])  # the second 6-mer is <oov>: its rows may be NaN (exact method)
    lp[6:] = np.nan
    assert checked_base_logprobs(lp, n_real, 6) is lp
    lp[2, 1] = np.nan
    with pytest.raises(NonFiniteOutputError, match="non-finite base log-probabilities"):
        checked_base_logprobs(lp, n_real, 6)
    lp[2, 1] = -np.inf  # a served top-N can give a base no mass: not the model's NaN
    assert checked_base_logprobs(lp, n_real, 6) is lp
