"""Base-pair and token-level decoding: brute-force choices, statistics, masks, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hexamer.fns import (
    bases_to_kmer,
    bp_greedy,
    bp_sample,
    bp_sampling_probs,
    digits_of,
    kmer_mask_from_positions,
    nucleus_mask,
    sample_from_probs,
    token_greedy,
    token_sample,
    token_sampling_probs,
    tokens_needed,
    trim_bases,
)
from tests.fns.fns_reference import bp_probs, greedy, kmers, nucleus_keep, random_logits, token_probs


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_mask(batch: int, k: int, seed: int) -> torch.Tensor:
    g = gen(seed)
    mask = torch.rand(batch, k, 4, generator=g) < 0.5
    first = torch.randint(0, 4, (batch, k), generator=g)
    return mask.scatter(-1, first[..., None], True)  # at least one allowed base everywhere


def five_sigma_ok(counts: np.ndarray, probs: np.ndarray, n: int) -> None:
    freq = counts / n
    bound = 5 * np.sqrt(probs * (1 - probs) / n) + 1e-12
    bad = np.abs(freq - probs) > bound
    assert not bad.any(), f"frequencies {freq[bad]} vs probabilities {probs[bad]}"


# --------------------------------------------------------------------------- greedy


def test_bp_greedy_matches_brute_force() -> None:
    x = random_logits(5, 6, seed=10, scale=1.5)
    assert bp_greedy(x).tolist() == [greedy(r.numpy()) for r in x]


def test_bp_greedy_with_mask_matches_brute_force() -> None:
    x = random_logits(5, 6, seed=11, scale=1.5)
    mask = random_mask(5, 6, seed=12)
    got = bp_greedy(x, allowed=mask)
    assert got.tolist() == [greedy(x[r].numpy(), mask[r].tolist()) for r in range(5)]
    assert mask.gather(-1, digits_of(got)[..., None]).all()


def test_bp_greedy_ties_go_to_lowest_atcg_index() -> None:
    # uniform: every marginal is exactly 1/4 -> AAAAAA
    assert bp_greedy(torch.zeros(1, 4096)).tolist() == [0]
    # AAAAAA and ATAAAA equally likely: position 1 ties A/T -> A
    x = torch.full((3, 4096), -torch.inf)
    x[0, bases_to_kmer("AAAAAA")] = 0.0
    x[0, bases_to_kmer("ATAAAA")] = 0.0
    # TCAAAA vs TGAAAA: C beats G on a tie
    x[1, bases_to_kmer("TCAAAA")] = 1.0
    x[1, bases_to_kmer("TGAAAA")] = 1.0
    # TTTTTT vs GGGGGG: every position ties T/G -> TTTTTT
    x[2, bases_to_kmer("GGGGGG")] = 2.0
    x[2, bases_to_kmer("TTTTTT")] = 2.0
    assert bp_greedy(x).tolist() == [bases_to_kmer(s) for s in ("AAAAAA", "TCAAAA", "TTTTTT")]


def test_bp_greedy_is_not_token_greedy() -> None:
    # k=2: p(AA)=.3 is the top k-mer, but the marginals prefer T at both positions
    p = {"AA": 0.3, "TT": 0.25, "TC": 0.25, "CT": 0.2}
    x = torch.full((1, 16), -torch.inf, dtype=torch.float64)
    for s, v in p.items():
        x[0, bases_to_kmer(s)] = math.log(v)
    assert token_greedy(x).tolist() == [bases_to_kmer("AA")]
    assert bp_greedy(x).tolist() == [bases_to_kmer("TT")]


def test_token_greedy_with_mask() -> None:
    x = random_logits(4, 6, seed=13)
    mask = random_mask(4, 6, seed=14)
    kmask = kmer_mask_from_positions(mask)
    got = token_greedy(x, allowed_kmers=kmask)
    for r in range(4):
        allowed = kmask[r].numpy()
        ref = int(np.argmax(np.where(allowed, x[r].numpy(), -np.inf)))
        assert int(got[r]) == ref


def test_kmer_mask_from_positions_matches_brute_force() -> None:
    mask = random_mask(2, 3, seed=15)
    got = kmer_mask_from_positions(mask)
    for r in range(2):
        ref = [all(mask[r, j, "ATCG".index(c)] for j, c in enumerate(s)) for s in kmers(3)]
        assert got[r].tolist() == ref


# --------------------------------------------------------------------------- top-p


@pytest.mark.parametrize(
    ("probs", "top_p", "kept"),
    [
        ([0.3, 0.3, 0.2, 0.2], 0.5, [1, 1, 0, 0]),  # tie A/T: both needed
        ([0.3, 0.3, 0.2, 0.2], 0.7, [1, 1, 1, 0]),  # tie C/G: C (lower ATCG index) wins
        ([0.2, 0.4, 0.2, 0.2], 0.5, [1, 1, 0, 0]),  # T first, then A wins the 3-way tie
        ([0.2, 0.4, 0.2, 0.2], 0.7, [1, 1, 1, 0]),
        ([0.1, 0.2, 0.3, 0.4], 0.05, [0, 0, 0, 1]),  # top base always kept
        ([0.5, 0.5, 0.0, 0.0], 1.0, [1, 1, 0, 0]),  # zero-probability bases never kept
        ([0.25, 0.25, 0.25, 0.25], 0.5, [1, 1, 0, 0]),  # mass exactly reaches p
    ],
)
def test_nucleus_mask_examples(probs: list[float], top_p: float, kept: list[int]) -> None:
    got = nucleus_mask(torch.tensor([probs], dtype=torch.float64), top_p)
    assert got[0].tolist() == [bool(v) for v in kept]


@settings(max_examples=150, deadline=None)
@given(
    weights=st.lists(st.integers(0, 6), min_size=4, max_size=4).filter(lambda w: sum(w) > 0),
    top_p=st.integers(1, 20).map(lambda i: i / 20),
)
def test_nucleus_mask_matches_brute_force(weights: list[int], top_p: float) -> None:
    # small integer weights make ties frequent and all partial sums exact
    t = torch.tensor([weights], dtype=torch.float64)
    assert nucleus_mask(t, top_p)[0].tolist() == nucleus_keep([float(w) for w in weights], top_p)


def test_bp_sampling_probs_match_brute_force() -> None:
    x = random_logits(3, 6, seed=16, scale=2.0)
    mask = random_mask(3, 6, seed=17)
    for temperature, top_p, allowed in [(1.0, 1.0, None), (0.7, 0.8, None), (1.5, 0.6, mask)]:
        got = bp_sampling_probs(x, temperature=temperature, top_p=top_p, allowed=allowed)
        for r in range(3):
            ref = bp_probs(x[r].numpy(), temperature, top_p, None if allowed is None else allowed[r].tolist())
            np.testing.assert_allclose(got[r].numpy(), ref, atol=2e-6)


def test_token_sampling_probs_match_brute_force() -> None:
    x = random_logits(2, 6, seed=18, scale=2.0)
    kmask = kmer_mask_from_positions(random_mask(2, 6, seed=19))
    for temperature, top_p, allowed in [(1.0, 1.0, None), (0.8, 0.9, None), (1.2, 0.5, kmask)]:
        got = token_sampling_probs(x, temperature=temperature, top_p=top_p, allowed_kmers=allowed)
        for r in range(2):
            ref = token_probs(
                x[r].numpy(), temperature, top_p, None if allowed is None else allowed[r].numpy()
            )
            np.testing.assert_allclose(got[r].numpy(), ref, atol=1e-7)


# --------------------------------------------------------------------------- sampling statistics


def test_bp_sample_frequencies() -> None:
    n, chunk = 20_000, 4_000
    row = random_logits(1, 6, seed=20, scale=3.0)  # peaked
    temperature, top_p = 0.7, 0.9
    g = gen(123)
    out = torch.cat(
        [
            bp_sample(row.expand(chunk, -1), temperature=temperature, top_p=top_p, generator=g)
            for _ in range(n // chunk)
        ]
    )
    bases = digits_of(out).numpy()
    expected = bp_probs(row[0].numpy(), temperature, top_p)
    assert (expected == 0).any()  # top-p really dropped something
    for j in range(6):
        counts = np.bincount(bases[:, j], minlength=4)
        five_sigma_ok(counts, expected[j], n)


def test_token_sample_frequencies() -> None:
    n = 20_000
    row = random_logits(1, 3, seed=21, scale=1.5)
    temperature, top_p = 1.3, 0.8
    out = token_sample(row.expand(n, -1), temperature=temperature, top_p=top_p, generator=gen(7))
    expected = token_probs(row[0].numpy(), temperature, top_p)
    five_sigma_ok(np.bincount(out.numpy(), minlength=64), expected, n)


def test_masks_are_never_violated() -> None:
    x = random_logits(1, 6, seed=22, scale=2.0).expand(2_000, -1)
    mask = random_mask(1, 6, seed=23)[0]  # (k, 4): the same for every row
    out = bp_sample(x, allowed=mask, generator=gen(0), top_p=0.95)
    digits = digits_of(out)
    assert mask[torch.arange(6), digits].all()
    kout = token_sample(
        x, allowed_kmers=kmer_mask_from_positions(mask[None]).expand(2_000, -1), generator=gen(1)
    )
    assert mask[torch.arange(6), digits_of(kout)].all()


def test_impossible_mask_raises() -> None:
    x = random_logits(2, 6, seed=24)
    mask = torch.ones(2, 6, 4, dtype=torch.bool)
    mask[1, 4] = False
    for fn in (bp_greedy, bp_sample):
        with pytest.raises(ValueError, match=r"impossible mask: row 1, position 4"):
            fn(x, allowed=mask)
    with pytest.raises(ValueError, match=r"impossible mask: row 1, position 4"):
        kmer_mask_from_positions(mask)
    with pytest.raises(ValueError, match="impossible mask"):
        token_sample(x, allowed_kmers=torch.zeros(2, 4096, dtype=torch.bool))


def test_allowed_bases_with_zero_probability_raise() -> None:
    x = random_logits(1, 6, seed=25)
    x[0, 3072:] = -torch.inf  # no k-mer starts with G
    mask = torch.ones(1, 6, 4, dtype=torch.bool)
    mask[0, 0] = torch.tensor([False, False, False, True])
    with pytest.raises(ValueError, match="row 0, position 0"):
        bp_sample(x, allowed=mask)
    with pytest.raises(ValueError, match="row 0"):
        token_greedy(x, allowed_kmers=kmer_mask_from_positions(mask))


def test_zero_probability_bases_are_never_sampled() -> None:
    x = torch.full((500, 4096), -torch.inf)
    x[:, bases_to_kmer("ACGTAC")] = 0.0
    x[:, bases_to_kmer("ACGTTT")] = 0.0
    out = bp_sample(x, generator=gen(3))
    assert set(out.tolist()) <= {bases_to_kmer(s) for s in ("ACGTAC", "ACGTAT", "ACGTTC", "ACGTTT")}
    # inverse CDF at the extreme uniforms
    p = torch.tensor([[0.0, 0.5, 0.0, 0.5, 0.0]], dtype=torch.float64)
    assert sample_from_probs(p, torch.tensor([0.0])).tolist() == [1]
    assert sample_from_probs(p, torch.tensor([1 - 2**-53])).tolist() == [3]


# --------------------------------------------------------------------------- reproducibility


def test_documented_random_number_order() -> None:
    x = random_logits(3, 6, seed=26)
    probs = bp_sampling_probs(x, temperature=0.9, top_p=0.95)
    seeds = [5, 6, 7]
    got = bp_sample(x, temperature=0.9, top_p=0.95, generator=[gen(s) for s in seeds])
    for r, s in enumerate(seeds):
        u = torch.rand(6, dtype=torch.float64, generator=gen(s))
        manual = [int((torch.cumsum(probs[r, j], 0) <= u[j]).sum()) for j in range(6)]
        assert digits_of(got[r]).tolist() == manual
    # a single generator: one torch.rand((B, k)) call, row-major
    u = torch.rand((3, 6), dtype=torch.float64, generator=gen(9))
    got = bp_sample(x, temperature=0.9, top_p=0.95, generator=gen(9))
    manual = (torch.cumsum(probs, -1) <= u[..., None]).sum(-1)
    assert torch.equal(digits_of(got), manual)


def test_same_seed_same_output() -> None:
    x = random_logits(8, 6, seed=27)
    a = bp_sample(x, temperature=1.2, top_p=0.9, generator=gen(11))
    b = bp_sample(x, temperature=1.2, top_p=0.9, generator=gen(11))
    assert torch.equal(a, b)
    assert torch.equal(token_sample(x, generator=gen(4)), token_sample(x, generator=gen(4)))
    torch.manual_seed(0)
    c = bp_sample(x)
    torch.manual_seed(0)
    assert torch.equal(c, bp_sample(x))


def test_row_output_independent_of_batch() -> None:
    x = random_logits(5, 6, seed=28, scale=1.0)
    seeds = [31, 32, 33, 34, 35]
    full = bp_sample(x, top_p=0.9, generator=[gen(s) for s in seeds])
    tok = token_sample(x, top_p=0.9, generator=[gen(s) for s in seeds])
    for r in range(5):
        alone = bp_sample(x[r : r + 1], top_p=0.9, generator=[gen(seeds[r])])
        assert int(alone) == int(full[r])
        assert int(token_sample(x[r : r + 1], top_p=0.9, generator=[gen(seeds[r])])) == int(tok[r])
    # reordered batch: each row follows its own generator
    perm = [3, 0, 4, 1, 2]
    shuffled = bp_sample(x[perm], top_p=0.9, generator=[gen(seeds[i]) for i in perm])
    assert torch.equal(shuffled, full[perm])


def test_generator_list_length_checked() -> None:
    with pytest.raises(ValueError, match="generators"):
        bp_sample(random_logits(3, 6, seed=29), generator=[gen(0), gen(1)])


# --------------------------------------------------------------------------- argument checks and helpers


def test_argument_checks() -> None:
    x = random_logits(1, 6, seed=30)
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="temperature"):
            bp_sample(x, temperature=bad)
        with pytest.raises(ValueError, match="temperature"):
            token_sample(x, temperature=bad)
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="top_p"):
            bp_sample(x, top_p=bad)
    with pytest.raises(ValueError):
        bp_greedy(x[0])  # must be (B, 4**k)
    with pytest.raises(ValueError, match="NaN"):
        bp_greedy(torch.full((1, 4096), math.nan))
    with pytest.raises(ValueError):
        bp_greedy(x, allowed=torch.ones(1, 5, 4, dtype=torch.bool))


def test_general_k_and_half_precision() -> None:
    x = random_logits(4, 3, seed=31).to(torch.bfloat16)
    assert bp_greedy(x).tolist() == [greedy(r.float().numpy()) for r in x]
    assert bp_sample(x, generator=gen(0)).max() < 64


def test_exact_base_counts() -> None:
    assert [tokens_needed(n) for n in (0, 1, 5, 6, 7, 12, 13)] == [0, 1, 1, 1, 2, 2, 3]
    assert tokens_needed(7, k=3) == 3
    with pytest.raises(ValueError):
        tokens_needed(-1)
    assert trim_bases("ACGTACGTAAAA", 10) == "ACGTACGTAA"
    assert trim_bases([1, 2, 3], 2) == [1, 2]
    assert torch.equal(trim_bases(torch.arange(12), 7), torch.arange(7))
    with pytest.raises(ValueError):
        trim_bases("ACG", 4)
