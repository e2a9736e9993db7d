"""Top-N log-probabilities -> k-mer logits, and the error bound of the approximation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from hexamer.fns import log_base_marginals
from hexamer.remote import kmer_rows
from hexamer.remote.marginals import marginal_error_bound
from hexamer.tokenizer import DnaLayout

K = 3  # 64 k-mers: small enough for brute force
LAYOUT = DnaLayout(dna_start_id=10, k=K)
VOCAB = LAYOUT.kmer_stop + 5


def full_logprobs(seed: int, scale: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=VOCAB) * scale
    return x - np.logaddexp.reduce(x)


def top(lp: np.ndarray, n: int, own: int | None = None):
    order = np.argsort(-lp)[:n]
    if own is not None and own not in order:
        order = np.append(order, own)
    return order.astype(np.int64), lp[order]


def brute_marginals(lp: np.ndarray) -> np.ndarray:
    """log P_j(b) by enumerating every k-mer (ATCG digit order), renormalised over the block."""
    block = np.exp(lp[LAYOUT.kmer_start : LAYOUT.kmer_stop])
    block = block / block.sum()
    out = np.zeros((K, 4))
    for f, digits in enumerate(itertools.product(range(4), repeat=K)):
        for j, d in enumerate(digits):
            out[j, d] += block[f]
    return np.log(out)


def test_full_top_gives_exact_marginals() -> None:
    lp = full_logprobs(0, 2.0)
    rows, cov = kmer_rows([top(lp, VOCAB)], LAYOUT, VOCAB)
    assert cov.incomplete == 0 and cov.worst_bound == 0
    got = log_base_marginals(rows)[0].numpy()
    np.testing.assert_allclose(got, brute_marginals(lp), atol=1e-12)


@pytest.mark.parametrize("n,scale", [(40, 3.0), (55, 2.0), (60, 4.0)])
def test_truncated_top_error_within_bound(n: int, scale: float) -> None:
    for seed in range(5):
        lp = full_logprobs(seed, scale)
        rows, cov = kmer_rows([top(lp, n)], LAYOUT, n)
        assert cov.incomplete == 1
        got = log_base_marginals(rows)[0].numpy()
        err = np.abs(got - brute_marginals(lp))
        assert np.all(err <= cov.worst_bound + 1e-9)
        assert cov.worst_bound > 0


def test_bound_is_infinite_when_a_base_loses_all_its_mass() -> None:
    kept = np.full(4**K, -1.0)
    have = np.ones(4**K, dtype=bool)
    have[: 4 ** (K - 1)] = False  # every k-mer starting with A
    assert math.isinf(marginal_error_bound(kept, have, -5.0))


def test_extra_columns_vllm_minus_9999_and_true_token() -> None:
    lp = full_logprobs(1, 1.0)
    ids, vals = top(lp, 20)
    vals = vals.copy()
    ids = np.append(ids, [LAYOUT.end_id, LAYOUT.kmer_start + 7])
    vals = np.append(vals, [-2.5, -9999.0])
    rows, cov = kmer_rows(
        [None, (ids, vals)], LAYOUT, 20, extra=(LAYOUT.end_id, LAYOUT.oov_id), targets=[-1, 7]
    )
    assert rows.shape == (2, 2 + 4**K)
    assert torch.isinf(rows[0]).all()
    assert rows[1, 0] == -2.5 and rows[1, 1] == -math.inf
    assert rows[1, 2 + 7] == -math.inf  # -9999.0 is vLLM's -inf
    assert cov.true_missing == 1 and cov.first_true_missing == 1
    message = cov.message("score via http://x", 20, 1e-3)
    assert message is not None and "true k-mer" in message and "--max-logprobs" in message
