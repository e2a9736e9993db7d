"""Marginals, log-marginals and exact within-token conditionals against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hexamer.fns import (
    base_marginals,
    block_softmax,
    chain_log_prob,
    exact_log_conditionals,
    fns_log_prob,
    log_base_marginals,
    log_prefix_conditionals,
    token_log_prob,
)
from tests.fns.fns_reference import exact_conditionals, kmers, marginals, prefix_mass, random_logits, softmax


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_marginals_match_brute_force(scale: float) -> None:
    x = random_logits(3, 6, seed=1, scale=scale)
    m = base_marginals(x)
    assert m.shape == (3, 6, 4) and m.dtype == torch.float32
    for r in range(3):
        np.testing.assert_allclose(m[r].numpy(), marginals(x[r].numpy()), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(m.sum(-1), torch.ones(3, 6), rtol=0, atol=1e-5)


def test_marginals_leading_dims_and_float64() -> None:
    x = random_logits(6, 3, seed=2, dtype=torch.float64).reshape(2, 3, 64)
    m = base_marginals(x)
    assert m.shape == (2, 3, 3, 4) and m.dtype == torch.float64
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(m[a, b].numpy(), marginals(x[a, b].numpy()), rtol=1e-12)


def test_bf16_is_computed_in_float32() -> None:
    x = random_logits(2, 6, seed=3).to(torch.bfloat16)
    assert base_marginals(x).dtype == torch.float32
    assert log_base_marginals(x).dtype == torch.float32
    ref = marginals(x[0].float().numpy())
    np.testing.assert_allclose(base_marginals(x)[0].numpy(), ref, rtol=1e-5, atol=1e-7)


def test_block_softmax_ignores_nothing_outside_block() -> None:
    x = random_logits(2, 6, seed=4)
    p = block_softmax(x)
    torch.testing.assert_close(p.sum(-1), torch.ones(2))


def test_log_marginals_equal_log_of_marginals() -> None:
    x = random_logits(4, 6, seed=5, scale=2.0, dtype=torch.float64)
    torch.testing.assert_close(log_base_marginals(x), base_marginals(x).log(), rtol=1e-10, atol=1e-10)
    x32 = x.float()
    torch.testing.assert_close(log_base_marginals(x32), base_marginals(x32).log(), rtol=1e-5, atol=1e-5)


def test_log_marginals_stable_where_probabilities_underflow() -> None:
    # one k-mer far above the rest: other bases have mass ~ exp(-1000), which underflows in exp
    x = torch.zeros(1, 4096)
    top = 433  # ATCGAT
    x[0, top] = 1000.0
    lm = log_base_marginals(x)[0]
    assert torch.isfinite(lm).all()
    # a non-top base at position j is carried by 1024 k-mers of logit 0: log P = log(1024) - 1000
    digits = [0, 1, 2, 3, 0, 1]
    for j in range(6):
        for b in range(4):
            if b == digits[j]:
                assert abs(float(lm[j, b])) < 1e-5
            else:
                assert float(lm[j, b]) == pytest.approx(math.log(1024) - 1000.0, abs=1e-3)


def test_exact_conditionals_match_brute_force() -> None:
    x = random_logits(3, 6, seed=6, scale=2.0)
    targets = torch.tensor([433, 0, 4095])
    got = exact_log_conditionals(x, targets)
    assert got.shape == (3, 6)
    for r in range(3):
        ref = np.log(exact_conditionals(x[r].numpy(), int(targets[r])))
        np.testing.assert_allclose(got[r].numpy(), ref, rtol=1e-4, atol=1e-5)


def test_prefix_conditionals_are_distributions() -> None:
    x = random_logits(2, 6, seed=7, dtype=torch.float64)
    targets = torch.tensor([2891, 1365])
    cond = log_prefix_conditionals(x, targets)
    assert cond.shape == (2, 6, 4)
    torch.testing.assert_close(torch.logsumexp(cond, -1), torch.zeros(2, 6, dtype=torch.float64))
    # position 0 has no prefix: it is the FNS marginal
    torch.testing.assert_close(cond[:, 0], log_base_marginals(x)[:, 0])
    # brute force on every base at position 3
    p = softmax(x[0].numpy())
    y = kmers(6)[2891]
    for b, c in enumerate("ATCG"):
        ref = prefix_mass(p, y[:3] + c) / prefix_mass(p, y[:3])
        assert float(cond[0, 3, b].exp()) == pytest.approx(ref, rel=1e-10)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 5), seed=st.integers(0, 2**31), scale=st.floats(0.1, 8.0), data=st.data())
def test_chain_rule_product_is_token_probability(
    k: int, seed: int, scale: float, data: st.DataObject
) -> None:
    x = random_logits(2, k, seed=seed, scale=scale, dtype=torch.float64)
    targets = torch.tensor(data.draw(st.lists(st.integers(0, 4**k - 1), min_size=2, max_size=2)))
    torch.testing.assert_close(chain_log_prob(x, targets), token_log_prob(x, targets), rtol=1e-9, atol=1e-9)
    # each marginal contains the token, so each log-marginal is >= the token log-prob
    lm = log_base_marginals(x)
    digits = torch.tensor([["ATCG".index(c) for c in kmers(k)[int(t)]] for t in targets])
    per_base = lm.gather(-1, digits[..., None]).squeeze(-1)
    assert torch.all(per_base >= token_log_prob(x, targets)[:, None] - 1e-9)
    # the FNS score is the sum of those log-marginals (brute force)
    m = marginals(x[0].numpy())
    y = kmers(k)[int(targets[0])]
    ref = sum(math.log(m[j, "ATCG".index(c)]) for j, c in enumerate(y))
    assert float(fns_log_prob(x, targets)[0]) == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_fns_product_differs_from_token_probability() -> None:
    # two equally likely k-mers AAAAAA and TTTTTT: FNS gives ATATAT-like mixtures mass
    x = torch.full((1, 4096), -torch.inf)
    x[0, 0] = 0.0
    x[0, 1365] = 0.0
    y = torch.tensor([0])
    assert float(token_log_prob(x, y)) == pytest.approx(math.log(0.5))
    assert float(chain_log_prob(x, y)) == pytest.approx(math.log(0.5))
    assert float(fns_log_prob(x, y)) == pytest.approx(6 * math.log(0.5))
    mixed = torch.tensor([int("010101", 4)])  # ATATAT
    assert float(token_log_prob(x, mixed)) == -math.inf
    assert float(fns_log_prob(x, mixed)) == pytest.approx(6 * math.log(0.5))


def test_zero_probability_prefix_gives_minus_inf_not_nan() -> None:
    x = random_logits(1, 6, seed=8)
    x[0, 3072:] = -torch.inf  # every k-mer starting with G is impossible
    y = torch.tensor([3072 + 5])
    cond = exact_log_conditionals(x, y)
    assert not torch.isnan(cond).any()
    assert float(cond[0, 0]) == -math.inf
    assert float(chain_log_prob(x, y)) == -math.inf


def test_shape_errors() -> None:
    with pytest.raises(ValueError):
        base_marginals(torch.zeros(2, 4095))
    with pytest.raises(ValueError):
        exact_log_conditionals(torch.zeros(2, 4096), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError):
        token_log_prob(torch.zeros(1, 4096), torch.tensor([4096]))
    with pytest.raises(TypeError):
        base_marginals(torch.zeros(2, 4096, dtype=torch.long))


@pytest.mark.parametrize("scale", [1.0, 30.0, 400.0])
def test_fast_base_mass_equals_logsumexp_form(scale: float) -> None:
    """The exp-and-sum path (with its exact fallback for underflowing rows) equals k logsumexps,
    values and gradients, from ordinary logits to ones where whole bases underflow."""
    from hexamer.fns.marginals import _log_base_mass, _log_base_mass_exact

    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(5, 4**6, generator=gen, dtype=torch.float64) * scale).float()
    x[1, :1024] -= 1e4  # base A at position 0 far below the rest
    x[2] = -torch.inf  # a fully masked row
    a = x.clone().requires_grad_(True)
    b = x.clone().requires_grad_(True)
    fast, exact = _log_base_mass(a, 6), _log_base_mass_exact(b, 6)
    assert torch.equal(torch.isneginf(fast), torch.isneginf(exact))
    finite = torch.isfinite(exact)
    torch.testing.assert_close(fast[finite], exact[finite], rtol=1e-5, atol=1e-4)
    w = torch.randn(fast.shape, generator=gen).float()
    (fast[finite] * w[finite]).sum().backward()
    (exact[finite] * w[finite]).sum().backward()
    live = [0, 1, 3, 4]  # the all--inf row has no meaningful gradient in either form
    torch.testing.assert_close(a.grad[live], b.grad[live], rtol=1e-4, atol=1e-6)
