"""Base-pair scoring of a known sequence against brute force (padded tail and <oov> included)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from hexamer.fns import score_bases, score_tokens, targets_from_sequence
from tests.fns.fns_reference import kmers, marginals, prefix_mass, random_logits, softmax

# full k-mer, an <oov> chunk (N), a full k-mer, then a 3-base tail padded to TTAAAA
SEQ = "ATCGAT" + "GGNCAA" + "CGTACG" + "tta"
N_REAL_BASES = 6 + 0 + 6 + 3


def brute_scores(logits: torch.Tensor, seq: str, method: str) -> list[float]:
    """log P of every real base, in sequence order, looping over tokens and bases."""
    out = []
    for t, start in enumerate(range(0, len(seq), 6)):
        chunk = seq[start : start + 6].upper()
        if any(c not in "ACGT" for c in chunk):
            continue
        row = logits[t].double().numpy()
        p = softmax(row)
        m = marginals(row)
        for j, c in enumerate(chunk):
            if method == "fns":
                out.append(math.log(m[j, "ATCG".index(c)]))
            else:
                out.append(math.log(prefix_mass(p, chunk[: j + 1]) / prefix_mass(p, chunk[:j])))
    return out


def test_targets_from_sequence() -> None:
    targets, n_real = targets_from_sequence(SEQ)
    all_k = kmers(6)
    assert n_real.tolist() == [6, 0, 6, 3]
    assert [all_k[int(t)] for t, n in zip(targets, n_real, strict=True) if n > 0] == [
        "ATCGAT",
        "CGTACG",
        "TTAAAA",
    ]
    assert targets_from_sequence("")[0].numel() == 0
    # an invalid character in the tail's real bases makes it <oov> too
    assert targets_from_sequence("ACGTACGN")[1].tolist() == [6, 0]


@pytest.mark.parametrize("method", ["fns", "exact"])
def test_score_bases_matches_brute_force(method: str) -> None:
    targets, n_real = targets_from_sequence(SEQ)
    logits = random_logits(len(targets), 6, seed=40, scale=2.0)
    score = score_bases(logits, targets, n_real, method=method)
    ref = brute_scores(logits, SEQ, method)
    assert len(ref) == N_REAL_BASES
    assert score.log_probs.shape == (N_REAL_BASES,)
    np.testing.assert_allclose(score.log_probs.numpy(), ref, rtol=1e-4, atol=1e-5)
    assert int(score.n_bases) == N_REAL_BASES
    assert float(score.mean) == pytest.approx(sum(ref) / len(ref), rel=1e-5)
    assert score.per_base.shape == (4, 6)
    assert score.base_mask.sum(-1).tolist() == [6, 0, 6, 3]


def test_oov_target_value_is_ignored() -> None:
    targets, n_real = targets_from_sequence(SEQ)
    logits = random_logits(len(targets), 6, seed=41)
    a = score_bases(logits, targets, n_real)
    targets2 = targets.clone()
    targets2[1] = -100  # anything goes where n_real == 0
    b = score_bases(logits, targets2, n_real)
    torch.testing.assert_close(a.log_probs, b.log_probs)


def test_exact_scores_sum_to_token_and_prefix_log_probs() -> None:
    targets, n_real = targets_from_sequence(SEQ)
    logits = random_logits(len(targets), 6, seed=42, dtype=torch.float64)
    exact = score_bases(logits, targets, n_real, method="exact")
    tok = score_tokens(logits, targets, valid=n_real > 0)
    sums = exact.per_base.sum(-1)
    # full tokens: the chain rule gives the token log-prob
    for t in (0, 2):
        assert float(sums[t]) == pytest.approx(float(tok.per_token[t]), rel=1e-10)
    # tail: the log-prob of the 3 real bases with the padding marginalised out
    p = softmax(logits[3].numpy())
    assert float(sums[3]) == pytest.approx(math.log(prefix_mass(p, "TTA")), rel=1e-10)
    assert float(tok.per_token[3]) < float(sums[3])  # token level also pays for the padded A's


def test_score_tokens_matches_brute_force() -> None:
    targets, n_real = targets_from_sequence(SEQ)
    logits = random_logits(len(targets), 6, seed=43)
    valid = n_real > 0
    tok = score_tokens(logits, targets, valid=valid)
    ref = [math.log(softmax(logits[t].numpy())[int(targets[t])]) for t in range(4) if valid[t]]
    np.testing.assert_allclose(tok.log_probs.numpy(), ref, rtol=1e-5)
    assert float(tok.mean) == pytest.approx(np.mean(ref), rel=1e-5)


def test_batched_scoring_with_mask_equals_per_sequence() -> None:
    seqs = [SEQ, "ACGTACGTTG"]
    enc = [targets_from_sequence(s) for s in seqs]
    T = max(len(t) for t, _ in enc)
    targets = torch.zeros(2, T, dtype=torch.long)
    n_real = torch.zeros(2, T, dtype=torch.long)
    valid = torch.zeros(2, T, dtype=torch.bool)
    for i, (t, n) in enumerate(enc):
        targets[i, : len(t)] = t
        n_real[i, : len(t)] = n
        n_real[i, len(t) :] = 6  # padding tokens: excluded by `valid`, whatever n_real says
        valid[i, : len(t)] = True
    logits = random_logits(2 * T, 6, seed=44).reshape(2, T, 4096)
    for method in ("fns", "exact"):
        batch = score_bases(logits, targets, n_real, method=method, valid=valid)
        for i, (t, n) in enumerate(enc):
            single = score_bases(logits[i, : len(t)], t, n, method=method)
            torch.testing.assert_close(batch.mean[i], single.mean)
            torch.testing.assert_close(batch.per_base[i][batch.base_mask[i]], single.log_probs)
        assert batch.n_bases.tolist() == [N_REAL_BASES, 10]


def test_empty_score_is_nan() -> None:
    s = score_bases(torch.zeros(2, 4096), torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.long))
    assert s.log_probs.numel() == 0 and math.isnan(float(s.mean))


def test_scoring_argument_checks() -> None:
    logits = torch.zeros(2, 4096)
    targets = torch.tensor([0, 1])
    with pytest.raises(ValueError):
        score_bases(logits, targets, torch.tensor([6, 7]))
    with pytest.raises(ValueError):
        score_bases(logits, targets, torch.tensor([6, 6]), method="token")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        score_bases(logits, torch.tensor([0, 4096]), torch.tensor([6, 6]))
    with pytest.raises(ValueError):
        score_bases(logits, targets[:1], torch.tensor([6]))


def test_bp_log_likelihoods_equal_one_row_at_a_time() -> None:
    from hexamer.fns.likelihood import bp_log_likelihood, bp_log_likelihoods

    rng = np.random.default_rng(3)
    lengths = [3, 1, 5]
    logits = torch.randn(sum(lengths), 4**6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    targets = rng.integers(0, 4**6, sum(lengths))
    n_real = rng.integers(0, 7, sum(lengths))
    got = bp_log_likelihoods(logits, targets, n_real, lengths)
    at = np.cumsum([0, *lengths])
    want = [bp_log_likelihood(logits[a:b], targets[a:b], n_real[a:b]) for a, b in itertools.pairwise(at)]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
