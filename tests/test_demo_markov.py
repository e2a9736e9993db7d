"""The demo's next-base Markov chain agrees with the trainer's baseline and is a distribution."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.demo import demo_data_files
from hexamer.demo.heldout import heldout_windows
from hexamer.demo.markov import NextBaseMarkov
from hexamer.train.data import load_corpus, validation_windows
from hexamer.train.evaluate import markov_accuracy

FILES = [p for p in demo_data_files() if p.name in ("lambda_phage.fa.gz", "saureus_n315.fa.gz")]


@pytest.mark.parametrize("order", [0, 2, 6])
def test_accuracy_matches_the_trainer_baseline(order: int) -> None:
    corpus = load_corpus([str(p) for p in FILES], val_fraction=0.1)
    windows = validation_windows(corpus.val, 6000)
    train, named = heldout_windows(FILES)
    assert [b for _, b in named] == [b for _, b in windows]
    chain = NextBaseMarkov(order).fit(train)
    right = total = 0
    for _, bases in named:
        r, n = chain.accuracy(bases)
        right, total = right + r, total + n
    assert right / total == markov_accuracy(corpus.train, windows, order=order, aligned=False)


def test_log_probs_are_normalised_and_back_off() -> None:
    chain = NextBaseMarkov(3).fit(["ACGTACGTACGTAAAC"])
    lp = chain.log_probs("ACGNTTTT")
    assert lp.shape == (8, 4)
    np.testing.assert_allclose(np.exp(lp).sum(1), 1.0, rtol=1e-12)
    # after ACG the next base was always T (both strands: ACGT is its own reverse complement)
    assert lp[3].argmax() == 3
    assert np.isfinite(chain.score("ACGTNNACGT"))


def test_greedy_follows_the_most_likely_path() -> None:
    chain = NextBaseMarkov(2).fit(["ACGT" * 50], both_strands=False)
    assert chain.greedy("AC", 8) == "GTACGTAC"
    assert chain.greedy("AC", 0) == ""


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="order"):
        NextBaseMarkov(13)
    with pytest.raises(ValueError, match="alpha"):
        NextBaseMarkov(2, alpha=0)
    with pytest.raises(ValueError, match="n must be"):
        NextBaseMarkov(2).greedy("A", -1)
