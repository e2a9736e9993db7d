"""The shared-prefix likelihood of single edits equals each edited sequence's own forward, and the
per-base values equal the sum of Carbon.base_logprobs at the sequence's bases (FNS marginals)."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.carbon import Carbon
from hexamer.design.optimise import EditRules, LikelihoodScorer
from hexamer.design.optimise.edits import apply_edit


def test_per_base_is_the_mean_of_base_logprobs(tiny_carbon: Carbon) -> None:
    seq = "ACGTTGCAAGGCTTAACGGATCCATG"  # 26 bp: a partial last 6-mer
    lp = tiny_carbon.base_logprobs(seq)
    want = np.mean([lp[i, "ACGT".index(b)] for i, b in enumerate(seq)])
    got = LikelihoodScorer(tiny_carbon.backend).per_base([seq])[0]
    assert got == pytest.approx(want, abs=1e-5)


@pytest.mark.parametrize("length", [24, 31])
def test_shared_prefix_edits_equal_one_forward_each(tiny_carbon: Carbon, length: int) -> None:
    rng = np.random.default_rng(length)
    seq = "".join(rng.choice(list("ACGT"), length))
    edits = EditRules.make(seq, frozen=range(3, 9)).single_edits(seq)
    shared = LikelihoodScorer(tiny_carbon.backend, batch_size=7, token_budget=64)
    naive = LikelihoodScorer(tiny_carbon.backend, shared=False)
    assert shared.shared and not naive.shared
    parent = shared.per_base([seq])[0]
    fast = shared.edits_per_base(seq, parent, edits)
    slow = naive.per_base([apply_edit(seq, p, b) for p, b in edits])
    assert np.abs(fast - slow).max() < 1e-6


def test_one_edit_in_a_token_still_scores(tiny_carbon: Carbon) -> None:
    seq = "ACGTACGTACGTACGTAC"
    scorer = LikelihoodScorer(tiny_carbon.backend)
    parent = scorer.per_base([seq])[0]
    got = scorer.edits_per_base(seq, parent, [(7, "A")])
    assert got[0] == pytest.approx(scorer.per_base([apply_edit(seq, 7, "A")])[0], abs=1e-6)


def test_bad_scorer_options(tiny_carbon: Carbon) -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LikelihoodScorer(tiny_carbon.backend, batch_size=0)
    with pytest.raises(ValueError, match="token_budget"):
        LikelihoodScorer(tiny_carbon.backend, token_budget=0)
