"""Speculative sampling maths: the accept / resample step reproduces the target's law exactly."""

from __future__ import annotations

import pytest
import torch

from hexamer.fns import (
    accept_draft,
    bp_sampling_probs,
    greedy_verify,
    product_distribution,
    product_prob,
    residual_distribution,
    sample_from_probs,
    verify_draft,
)


def _spec_first_token(p: torch.Tensor, q: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    """Vectorised one-step speculative sampling: draft from q, accept/reject, resample."""
    v = p.shape[0]
    d = sample_from_probs(q.expand(n, v), torch.rand(n, dtype=torch.float64, generator=gen))
    a = accept_draft(p[d][:, None], q[d][:, None], torch.rand(n, 1, dtype=torch.float64, generator=gen))
    res = residual_distribution(p, q)
    r = sample_from_probs(res.expand(n, v), torch.rand(n, dtype=torch.float64, generator=gen))
    return torch.where(a == 1, d, r)


@pytest.mark.parametrize(
    ("p", "q"),
    [
        ([0.5, 0.2, 0.2, 0.1, 0.0], [0.1, 0.1, 0.3, 0.2, 0.3]),
        ([0.0, 0.0, 1.0, 0.0, 0.0], [0.25, 0.25, 0.0, 0.25, 0.25]),  # draft never proposes the answer
        ([0.3, 0.3, 0.4, 0.0, 0.0], [0.3, 0.3, 0.4, 0.0, 0.0]),  # identical: always accepted
        ([0.05, 0.05, 0.05, 0.05, 0.8], [0.8, 0.05, 0.05, 0.05, 0.05]),
    ],
)
def test_accept_resample_gives_p(p: list[float], q: list[float]) -> None:
    pt, qt = torch.tensor(p, dtype=torch.float64), torch.tensor(q, dtype=torch.float64)
    # analytically: P(out = x) = q(x) min(1, p(x)/q(x)) + (1 - sum_y min(p, q)) * residual(x)
    accepted = torch.minimum(pt, qt)
    exact = accepted + (1 - accepted.sum()) * residual_distribution(pt, qt)
    torch.testing.assert_close(exact, pt)
    # empirically, through the same functions the decoder uses
    n = 200_000
    out = _spec_first_token(pt, qt, n, torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=len(p)).double() / n
    assert float((freq - pt).abs().sum()) / 2 < 0.006  # TV distance; sampling noise is ~0.002
    assert float(freq[pt == 0].sum()) == 0.0


def test_product_distribution_is_independent_bases() -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 4**6, generator=gen) * 3
    per_base = bp_sampling_probs(logits, temperature=0.8, top_p=0.9)
    joint = product_distribution(per_base)
    torch.testing.assert_close(joint.sum(-1), torch.ones(3, dtype=torch.float64))
    # bp sampling with one uniform per base lands on k-mer x with probability prod_j P_j(x_j)
    kmer = torch.tensor([0, 1234, 4095])
    digits = torch.stack([(kmer // 4 ** (5 - j)) % 4 for j in range(6)], -1)
    expect = per_base[torch.arange(3)[:, None], torch.arange(6), digits].prod(-1)
    torch.testing.assert_close(joint[torch.arange(3), kmer], expect)


def test_product_prob_is_one_entry_of_the_table() -> None:
    per_base = bp_sampling_probs(
        torch.randn(4, 4**6, generator=torch.Generator().manual_seed(1)), temperature=1.0
    )
    kmers = torch.tensor([0, 7, 2048, 4095])
    torch.testing.assert_close(
        product_prob(per_base, kmers), product_distribution(per_base)[torch.arange(4), kmers]
    )


def test_verify_draft_law_over_two_slots() -> None:
    """A two-draft round through verify_draft: the first emitted token follows p_1 exactly, and the
    second (when the first draft was accepted) follows p_2 (empirical TV distance)."""
    p = torch.tensor(
        [[0.6, 0.3, 0.1, 0.0], [0.1, 0.1, 0.1, 0.7], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64
    )
    q = torch.tensor([[0.2, 0.2, 0.3, 0.3], [0.4, 0.4, 0.1, 0.1]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    n = 20_000
    first = torch.zeros(4, dtype=torch.float64)
    second = torch.zeros(4, dtype=torch.float64)
    for _ in range(n):
        u = torch.rand(4, dtype=torch.float64, generator=gen)
        d = torch.stack([sample_from_probs(q[0], u[0]), sample_from_probs(q[1], u[1])])
        a, y = verify_draft(p, q, d, torch.rand(2, dtype=torch.float64, generator=gen), u[3])
        out = [*d[:a].tolist(), y]
        first[out[0]] += 1
        if len(out) > 1:
            second[out[1]] += 1
    assert float((first / n - p[0]).abs().sum()) / 2 < 0.03
    assert float((second / second.sum() - p[1]).abs().sum()) / 2 < 0.03
    assert first[3] == 0  # p_1 gives it no mass


def test_greedy_verify() -> None:
    assert greedy_verify([5, 6, 7], [5, 6, 9, 1]) == (2, 9)
    assert greedy_verify([5, 6], [5, 6, 8]) == (2, 8)  # all accepted: the bonus pick
    assert greedy_verify([], [3]) == (0, 3)
    assert greedy_verify([4], [3, 1]) == (0, 3)
