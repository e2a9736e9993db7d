"""The FNS training loss: corrected and reference-bug variants against loop-based re-implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hexamer.fns import fns_loss
from hexamer.fns.tables import bases_to_kmer
from tests.fns.fns_reference import kmers, log_softmax_full, softmax

K = 3
KMER_START = 20
VOCAB = KMER_START + 4**K + 8  # 20 "BPE" rows (17..19 play <dna>, </dna>, <oov>), k-mers, 8 unused
DNA, END, OOV, PAD = 17, 18, 19, 5


def make_batch(seed: int, dtype=torch.float64, scale: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 9, VOCAB, generator=g, dtype=torch.float64).mul(scale).to(dtype)
    km = [KMER_START + bases_to_kmer(s) for s in ("ATC", "GGA", "CCT", "TAA", "ACG", "TTT", "GCA")]
    labels = torch.tensor(
        [
            [3, DNA, km[0], km[1], km[2], km[3], END, PAD, -100],
            [11, DNA, km[4], OOV, km[5], km[6], END, 7, VOCAB - 1],  # last: an <unused_i> row
        ]
    )
    # real bases per label: full k-mers 3, the tails 1 and 2; non-k-mer entries are irrelevant
    valid_len = torch.tensor([[-1, 0, 3, 3, 3, 1, 0, -2, -2], [-1, 0, 3, 0, 3, 2, 0, -1, -1]])
    return logits, labels, valid_len


def brute_corrected(logits, labels, valid_len, non_kmer, ignore_ids, k=K, kmer_start=KMER_START):
    all_k = kmers(k)
    bp_sum = ce_sum = 0.0
    n_bases = n_kmer = n_ce = 0
    flat_logits = logits.double().reshape(-1, logits.shape[-1]).numpy()
    flat_labels = labels.reshape(-1).tolist()
    flat_vl = None if valid_len is None else valid_len.reshape(-1).tolist()
    for i, y in enumerate(flat_labels):
        if y == -100 or y in ignore_ids:
            continue
        logp = log_softmax_full(flat_logits[i])  # full-vocabulary denominator
        if kmer_start <= y < kmer_start + 4**k:
            n_kmer += 1
            s = all_k[y - kmer_start]
            vl = k if flat_vl is None else flat_vl[i]
            for j in range(max(0, vl)):
                mass = sum(math.exp(logp[kmer_start + v]) for v, u in enumerate(all_k) if u[j] == s[j])
                bp_sum -= math.log(mass)
                n_bases += 1
        elif non_kmer == "token_ce":
            ce_sum -= logp[y]
            n_ce += 1
    return {
        "loss": (bp_sum + ce_sum) / max(1, n_bases + n_ce),
        "bp_loss": bp_sum / max(1, n_bases),
        "token_loss": ce_sum / max(1, n_ce),
        "n_bases": n_bases,
        "n_kmer_tokens": n_kmer,
        "n_ce_tokens": n_ce,
    }


def brute_reference_bug(logits, labels, non_kmer, ignore_ids, k=K, kmer_start=KMER_START):
    """The described trainer bug: every non-k-mer row is base 'A' at every position; no tail mask."""
    vocab = logits.shape[-1]
    all_k = kmers(k)
    base_of = []  # base_of[v][j]
    for v in range(vocab):
        if kmer_start <= v < kmer_start + 4**k:
            base_of.append(["ATCG".index(c) for c in all_k[v - kmer_start]])
        else:
            base_of.append([0] * k)
    flat_logits = logits.double().reshape(-1, vocab).numpy()
    kmer_rows, ce_rows = [], []
    for i, y in enumerate(labels.reshape(-1).tolist()):
        if y == -100 or y in ignore_ids:
            continue
        (kmer_rows if kmer_start <= y < kmer_start + 4**k else ce_rows).append((i, y))
    per_pos = []
    for j in range(k):
        nll = []
        for i, y in kmer_rows:
            p = softmax(flat_logits[i])
            marg = [0.0] * 4
            for v in range(vocab):
                marg[base_of[v][j]] += p[v]
            nll.append(-math.log(max(marg[base_of[y][j]], 1e-8)))
        per_pos.append(np.mean(nll) if nll else 0.0)
    bp = float(np.mean(per_pos)) if kmer_rows else 0.0
    tok = float(np.mean([-log_softmax_full(flat_logits[i])[y] for i, y in ce_rows])) / k if ce_rows else 0.0
    nk, nt = len(kmer_rows), len(ce_rows)
    loss = bp if non_kmer == "ignore" else (bp * nk + tok * nt) / max(1, nk + nt)
    return {
        "loss": loss,
        "bp_loss": bp,
        "token_loss": tok if non_kmer == "token_ce" else None,
        "n_kmer_tokens": nk,
    }


def check(out, ref, rtol=1e-9) -> None:
    for name, value in ref.items():
        if value is None:
            continue
        got = getattr(out, name)
        if name.startswith("n_"):
            assert int(got) == value, name
        else:
            assert float(got) == pytest.approx(value, rel=rtol, abs=1e-12), name


@pytest.mark.parametrize("non_kmer", ["ignore", "token_ce"])
@pytest.mark.parametrize("use_valid_len", [True, False])
def test_corrected_matches_brute_force(non_kmer: str, use_valid_len: bool) -> None:
    logits, labels, valid_len = make_batch(seed=50)
    vl = valid_len if use_valid_len else None
    ignore = (DNA, END, OOV)
    out = fns_loss(
        logits, labels, kmer_start=KMER_START, k=K, valid_len=vl, non_kmer=non_kmer, ignore_ids=ignore
    )
    check(out, brute_corrected(logits, labels, vl, non_kmer, ignore))
    assert int(out.n_kmer_tokens) == 7
    assert int(out.n_bases) == (3 + 3 + 3 + 1 + 3 + 3 + 2 if use_valid_len else 21)


def test_corrected_k6_float32() -> None:
    g = torch.Generator().manual_seed(51)
    vocab = 3 + 4096 + 5
    logits = torch.randn(1, 4, vocab, generator=g) * 2
    labels = torch.tensor([[1, 3 + 433, 3 + 4095, 3 + 2816]])  # text, ATCGAT, GGGGGG, tail CG(AAAA)
    valid_len = torch.tensor([[-1, 6, 6, 2]])
    out = fns_loss(logits, labels, kmer_start=3, valid_len=valid_len, non_kmer="token_ce")
    ref = brute_corrected(logits, labels, valid_len, "token_ce", (), k=6, kmer_start=3)
    check(out, ref, rtol=1e-5)
    assert int(out.n_bases) == 14


def test_shift_is_the_causal_shift() -> None:
    logits, labels, valid_len = make_batch(seed=52)
    a = fns_loss(
        logits, labels, kmer_start=KMER_START, k=K, valid_len=valid_len, shift=True, non_kmer="token_ce"
    )
    b = fns_loss(
        logits[:, :-1],
        labels[:, 1:],
        kmer_start=KMER_START,
        k=K,
        valid_len=valid_len[:, 1:],
        non_kmer="token_ce",
    )
    assert torch.equal(a.loss, b.loss) and int(a.n_bases) == int(b.n_bases)


@pytest.mark.parametrize("non_kmer", ["ignore", "token_ce"])
def test_reference_bug_matches_brute_force(non_kmer: str) -> None:
    logits, labels, valid_len = make_batch(seed=53)
    ignore = (OOV, PAD)  # what the public trainer ignores
    out = fns_loss(
        logits, labels, kmer_start=KMER_START, k=K, non_kmer=non_kmer, ignore_ids=ignore, reference_bug=True
    )
    ref = brute_reference_bug(logits, labels, non_kmer, ignore)
    check(out, ref, rtol=2e-6)  # the trainer's marginal buffer is float32
    assert int(out.n_bases) == 7 * K
    # no tail masking: valid_len changes nothing
    out2 = fns_loss(
        logits,
        labels,
        kmer_start=KMER_START,
        k=K,
        valid_len=valid_len,
        non_kmer=non_kmer,
        ignore_ids=ignore,
        reference_bug=True,
    )
    assert torch.equal(out.loss, out2.loss)


def test_reference_bug_absorbs_non_dna_mass_into_a() -> None:
    # all probability on a BPE token: the reference variant sees a perfect 'A' prediction
    logits = torch.full((1, VOCAB), -30.0, dtype=torch.float64)
    logits[0, 3] = 30.0
    labels = torch.tensor([KMER_START + bases_to_kmer("AAA")])
    ref = fns_loss(logits, labels, kmer_start=KMER_START, k=K, reference_bug=True)
    fixed = fns_loss(logits, labels, kmer_start=KMER_START, k=K)
    assert float(ref.loss) < 1e-6
    assert float(fixed.loss) > 50.0


def test_variants_agree_without_non_dna_mass_or_tails() -> None:
    logits, labels, _ = make_batch(seed=54)
    logits[..., :KMER_START] = -1e4
    logits[..., KMER_START + 4**K :] = -1e4
    a = fns_loss(logits, labels, kmer_start=KMER_START, k=K, ignore_ids=(OOV, PAD))
    b = fns_loss(logits, labels, kmer_start=KMER_START, k=K, ignore_ids=(OOV, PAD), reference_bug=True)
    assert float(a.loss) == pytest.approx(float(b.loss), rel=1e-5)


def test_gradient_matches_the_report_formula() -> None:
    # vocabulary = the k-mers only: dL/dz_v = p(v)/k * (k - sum_{j: v_j = y_j} 1 / P_j(y_j))
    k = 2
    z = torch.randn(
        1, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(55), requires_grad=True
    )
    y = bases_to_kmer("TC")
    fns_loss(z, torch.tensor([y]), kmer_start=0, k=k).loss.backward()
    p = softmax(z.detach()[0].numpy())
    all_k = kmers(k)
    marg = [[sum(p[v] for v, s in enumerate(all_k) if s[j] == c) for c in "ATCG"] for j in range(k)]
    yk = all_k[y]
    ref = [
        p[v] / k * (k - sum(1 / marg[j]["ATCG".index(yk[j])] for j in range(k) if s[j] == yk[j]))
        for v, s in enumerate(all_k)
    ]
    np.testing.assert_allclose(z.grad[0].numpy(), ref, rtol=1e-10, atol=1e-14)


def test_gradcheck_corrected() -> None:
    g = torch.Generator().manual_seed(56)
    logits = torch.randn(5, 4 + 16 + 2, dtype=torch.float64, generator=g, requires_grad=True)
    labels = torch.tensor([4, 9, 1, 19, 4 + 16])
    valid_len = torch.tensor([2, 1, 0, 2, 0])

    def f(x: torch.Tensor) -> torch.Tensor:
        return fns_loss(x, labels, kmer_start=4, k=2, valid_len=valid_len, non_kmer="token_ce").loss

    assert torch.autograd.gradcheck(f, (logits,))


@pytest.mark.parametrize("reference_bug", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients_finite(reference_bug: bool, dtype: torch.dtype) -> None:
    logits, labels, valid_len = make_batch(seed=57, scale=300.0)
    logits = logits.to(dtype).requires_grad_(True)
    out = fns_loss(
        logits,
        labels,
        kmer_start=KMER_START,
        k=K,
        valid_len=valid_len,
        non_kmer="token_ce",
        ignore_ids=(OOV, PAD),
        reference_bug=reference_bug,
    )
    out.loss.backward()
    assert torch.isfinite(out.loss) and torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 0


def test_nothing_supervised_is_zero_with_grad() -> None:
    logits = torch.randn(1, 3, VOCAB, requires_grad=True)
    labels = torch.tensor([[-100, OOV, 3]])
    for ref in (False, True):
        out = fns_loss(logits, labels, kmer_start=KMER_START, k=K, ignore_ids=(OOV,), reference_bug=ref)
        assert out.loss.item() == 0.0 and int(out.n_bases) == 0
        out.loss.backward()


def test_loss_argument_checks() -> None:
    logits = torch.zeros(2, VOCAB)
    with pytest.raises(ValueError):
        fns_loss(logits, torch.tensor([0, 1]), kmer_start=VOCAB - 10, k=K)
    with pytest.raises(ValueError):
        fns_loss(logits, torch.tensor([0]), kmer_start=KMER_START, k=K)
    with pytest.raises(ValueError):
        fns_loss(logits, torch.tensor([0, 1]), kmer_start=KMER_START, k=K, non_kmer="ce")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fns_loss(
            logits, torch.tensor([KMER_START, 1]), kmer_start=KMER_START, k=K, valid_len=torch.tensor([4, 0])
        )
