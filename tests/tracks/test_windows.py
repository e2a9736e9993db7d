"""Strided sliding windows: the plan's rule, range checks, equality with the unstrided call when a
sequence fits, and, for long sequences, each base equal to ``base_logprobs`` of its own window."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hexamer import Carbon, UnscoredSequenceWarning
from hexamer.tracks import check_stride, plan_windows, scored_bases, strided_base_logprobs, window_capacity

K = 6


def _random_dna(n: int, seed: int = 0) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), n))


@settings(max_examples=200, deadline=None)
@given(
    n_bases=st.integers(1, 400),
    window=st.integers(1, 20),
    stride_frac=st.floats(0.01, 1.0),
)
def test_each_base_comes_from_the_earliest_window_holding_it(
    n_bases: int, window: int, stride_frac: float
) -> None:
    stride = max(1, min(window, round(window * stride_frac)))
    wins = plan_windows(n_bases, k=K, window_tokens=window, stride_tokens=stride)
    assert wins[0].start == 0 and wins[-1].end == n_bases
    owner = np.full(n_bases, -1)
    for j, w in enumerate(wins):
        assert w.start % K == 0 and w.start <= w.keep_start <= w.keep_end <= w.end
        assert (w.end - w.start) <= window * K
        assert (owner[w.keep_start : w.keep_end] == -1).all()  # no base given twice
        owner[w.keep_start : w.keep_end] = j
    assert (owner >= 0).all()  # every base given once
    for i in range(n_bases):  # the most left context = the earliest window holding the base
        holding = [j for j, w in enumerate(wins) if w.start <= i < w.end]
        assert owner[i] == min(holding)


def test_stride_is_range_checked() -> None:
    check_stride(6, 60, K)
    check_stride(60, 60, K)
    with pytest.raises(ValueError, match="between 1 and the window"):
        check_stride(0, 60, K)
    with pytest.raises(ValueError, match="between 1 and the window"):
        check_stride(66, 60, K)
    with pytest.raises(ValueError, match=r"multiple of 6 bases.*6-mer boundary"):
        check_stride(9, 60, K)
    with pytest.raises(TypeError):
        check_stride(6.0, 60, K)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        check_stride(True, 60, K)  # type: ignore[arg-type]


def test_scored_bases_marks_oov_chunks() -> None:
    mask = scored_bases("ACGTACnCGTACGTAcgtAC", K)
    assert mask.tolist() == [True] * 6 + [False] * 6 + [True] * 8
    assert scored_bases("ACGTACGTN", K).tolist() == [True] * 6 + [False] * 3


def test_without_stride_a_long_sequence_is_still_refused(short_model: Carbon) -> None:
    seq = _random_dna(1000)
    with pytest.raises(ValueError, match="more than the model's context"):
        short_model.score(seq)
    with pytest.raises(ValueError, match="more than the model's context"):
        short_model.base_logprobs(seq)


@pytest.mark.parametrize("method", ["fns", "exact"])
def test_strided_equals_unstrided_when_the_sequence_fits(short_model: Carbon, method: str) -> None:
    seqs = [_random_dna(200, 1), _random_dna(233, 2) + "N"]
    for s in seqs:
        np.testing.assert_array_equal(
            short_model.base_logprobs(s, method=method, stride=60),
            short_model.base_logprobs(s, method=method),
        )
    for level in ("bp", "token"):
        a = short_model.score(seqs, level=level, method=method)
        b = short_model.score(seqs, level=level, method=method, stride=6)
        for x, y in zip(a, b, strict=True):
            assert x.mean == y.mean and x.n_scored == y.n_scored and x.n_oov_bases == y.n_oov_bases
            np.testing.assert_array_equal(
                x.per_base if level == "bp" else x.per_token, y.per_base if level == "bp" else y.per_token
            )


@pytest.mark.parametrize(("stride", "method"), [(6, "fns"), (114, "fns"), (234, "fns"), (60, "exact")])
def test_long_sequence_bases_equal_base_logprobs_of_their_window(
    short_model: Carbon, stride: int, method: str
) -> None:
    seq = _random_dna(1003, 3)
    seq = seq[:504] + "N" * 12 + seq[516:]  # exactly two 6-mers
    capacity = window_capacity(short_model) * K
    assert capacity == 234
    lp = short_model.base_logprobs(seq, stride=stride, method=method)
    assert lp.shape == (len(seq), 4)
    wins = plan_windows(len(seq), k=K, window_tokens=capacity // K, stride_tokens=stride // K)
    assert len(wins) > 1
    for w in wins:
        ref = short_model.base_logprobs(seq[w.start : w.end], method=method)
        np.testing.assert_array_equal(
            lp[w.keep_start : w.keep_end], ref[w.keep_start - w.start : w.keep_end - w.start]
        )
    score = short_model.score(seq, stride=stride, method=method)
    idx = np.array(["ACGT".find(c) for c in seq])
    real = idx >= 0
    expected = np.full(len(seq), np.nan, dtype=np.float32)
    expected[real] = lp[np.flatnonzero(real), idx[real]]
    expected[~scored_bases(seq, K)] = np.nan
    np.testing.assert_allclose(score.per_base, expected, rtol=0, atol=1e-6)
    assert score.n_oov_bases == 12 and score.n_scored == len(seq) - 12
    assert score.mean == pytest.approx(float(np.nanmean(expected.astype(np.float64))), abs=1e-6)


def test_long_sequence_token_level(short_model: Carbon) -> None:
    seq = _random_dna(800, 4)
    stitched = short_model.score(seq, level="token", stride=120)
    wins = plan_windows(len(seq), k=K, window_tokens=39, stride_tokens=20)
    for w in wins:
        part = short_model.score(seq[w.start : w.end], level="token")
        a, b = w.keep_start // K, -(-w.keep_end // K)
        np.testing.assert_allclose(
            stitched.per_token[a:b], part.per_token[a - w.start // K : b - w.start // K], rtol=0, atol=1e-6
        )
    assert stitched.n_scored == len(seq) // K  # 800 = 133 full 6-mers + a tail of 2


def test_long_all_n_sequence_is_unscored_with_one_warning(short_model: Carbon) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = short_model.score(["N" * 600, _random_dna(600)], stride=60)
    assert results[0].status == "unscored" and np.isnan(results[0].mean) and results[0].n_oov_bases == 600
    assert results[1].status == "ok"
    unscored = [w for w in caught if issubclass(w.category, UnscoredSequenceWarning)]
    assert len(unscored) == 1 and "sequence 0" in str(unscored[0].message)


def test_errors_name_the_sequence_and_bases(short_model: Carbon) -> None:
    seq = _random_dna(600)
    bad = seq[:400] + "X" + seq[401:]
    with pytest.raises(ValueError, match=r"sequence 1 \(bases \d+-\d+\): invalid character 'X'"):
        short_model.score([seq, bad], stride=60)
    with pytest.raises(ValueError, match="multiple of 6"):
        short_model.score(seq, stride=61)
    with pytest.raises(ValueError, match="between 1 and the window"):
        short_model.base_logprobs(seq, stride=240)


def test_a_prefix_shrinks_the_window(short_model: Carbon) -> None:
    prefix = "<mammalian_species> <gene_type>"
    used = len(short_model.tokenizer.encode(prefix))
    assert window_capacity(short_model, prefix) == 39 - used
    seq = _random_dna(600, 5)
    lp = strided_base_logprobs(short_model, seq, stride=60, prefix=prefix)
    w = plan_windows(len(seq), k=K, window_tokens=39 - used, stride_tokens=10)[-1]
    ref = short_model.base_logprobs(seq[w.start : w.end], prefix=prefix)
    np.testing.assert_array_equal(lp[w.keep_start :], ref[w.keep_start - w.start :])


def test_a_server_model_takes_the_same_windows(short_model: Carbon, short_folder: Path) -> None:
    """A served model's ``Carbon`` has one token less room (the completion token): with the same window and
    stride the stitched values equal the local ones."""
    from hexamer.tracks import strided_score
    from tests.remote.fake_server import FakeSettings, make_app, serve

    seq = _random_dna(300, 6)  # two windows
    with (
        serve(make_app(short_model, FakeSettings(max_model_len=40))) as url,
        Carbon.from_server(url, tokenizer=short_folder, top_n=4608) as remote,
    ):
        assert window_capacity(remote) == 38
        got = strided_base_logprobs(remote, seq, stride=114, window=228)
        score = strided_score(remote, seq, stride=114, window=228)
    want = strided_base_logprobs(short_model, seq, stride=114, window=228)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    np.testing.assert_allclose(
        score.per_base, want[np.arange(len(seq)), ["ACGT".index(c) for c in seq]], atol=1e-5
    )


def test_one_non_finite_window_fails_the_whole_sequence(
    short_model: Carbon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window's NaN values are no unscored bases: the stitched result is failed, not a mean of the rest."""
    from hexamer.backend.results import FailedResultWarning, ScoreResult

    score = short_model.score

    def one_window_fails(texts: list[str], **options: object) -> list[ScoreResult]:
        parts = score(texts, **options)
        nan = np.full(len(parts[1].per_base), np.nan, dtype=np.float32)
        parts[1] = ScoreResult(mean=float("nan"), n_scored=parts[1].n_scored, n_oov_bases=0, per_base=nan)
        return parts

    monkeypatch.setattr(short_model, "score", one_window_fails)
    from hexamer.tracks import strided_score

    with pytest.warns(FailedResultWarning, match="sequence 0"):
        result = strided_score(short_model, _random_dna(600), stride=120)
    assert result.status == "failed" and np.isnan(result.mean) and "non-finite" in result.reason
