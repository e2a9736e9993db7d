"""``sequence_loglik`` against a direct full-vocabulary log-softmax from transformers' Llama."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.evals.scoring import sequence_loglik

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_model(tiny_folder: Path):
    return transformers.LlamaForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32).eval()


def published_token_ll(hf_model, tok, seq: str, prefix: str = "<dna>") -> float:
    """The published recipe, written out: trim to whole 6-mers from the right, tokenise prefix + DNA,
    log_softmax over the whole vocabulary, mean log-prob of every token after the first."""
    dna = seq[: len(seq) // 6 * 6]
    ids = tok.encode(prefix + dna)
    n_prefix = len(tok.encode(prefix))
    with torch.no_grad():
        logits = hf_model(torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits, dim=-1)
    targets = torch.tensor(ids[n_prefix:])
    return float(logp[n_prefix - 1 : len(ids) - 1].gather(-1, targets[:, None]).mean())


def test_token_level_matches_transformers_full_vocab(carbon: Carbon, hf_model, human_dna: str) -> None:
    seqs = [
        human_dna[:600],
        human_dna[1000:1347],
        human_dna[5000:5100] + "NNNNNN" + human_dna[9000:9031],
        "ACG",
    ]
    got = sequence_loglik(carbon, seqs, level="token", batch_size=2)
    for s, g in zip(seqs[:3], got[:3], strict=True):
        assert g == pytest.approx(published_token_ll(hf_model, carbon.tokenizer, s), abs=2e-5)
    assert np.isnan(got[3])  # shorter than one 6-mer: nothing to score


def test_token_level_with_metadata_prefix(carbon: Carbon, hf_model, human_dna: str) -> None:
    prefix = "<mammalian_species><dna>"
    got = sequence_loglik(carbon, [human_dna[:240]], level="token", prefix=prefix)
    assert got[0] == pytest.approx(
        published_token_ll(hf_model, carbon.tokenizer, human_dna[:240], prefix), abs=2e-5
    )


def test_batching_does_not_change_scores(carbon: Carbon, human_dna: str) -> None:
    seqs = [human_dna[i * 97 : i * 97 + 60 + 31 * i] for i in range(7)]
    one = sequence_loglik(carbon, seqs, level="token", batch_size=1)
    many = sequence_loglik(carbon, seqs, level="token", batch_size=5)
    np.testing.assert_allclose(one, many, atol=1e-5)
    one = sequence_loglik(carbon, seqs, level="bp", batch_size=1)
    many = sequence_loglik(carbon, seqs, level="bp", batch_size=5)
    np.testing.assert_allclose(one, many, atol=1e-5)


def test_bp_level_is_fns_marginal(carbon: Carbon, hf_model, human_dna: str) -> None:
    """Mean over bases of log P_j(true base), marginals of the 6-mer block softmax (by hand)."""
    seq = human_dna[200:437]  # 237 bp: a 3-base tail token
    got = sequence_loglik(carbon, [seq], level="bp")[0]
    layout = carbon.layout
    ids = carbon.tokenizer.encode("<dna>" + seq)
    with torch.no_grad():
        logits = hf_model(torch.tensor([ids])).logits[0].double()
    block = torch.log_softmax(logits[:, layout.kmer_start : layout.kmer_stop], dim=-1).exp()
    kmers = layout.kmers
    total, n = 0.0, 0
    for i, base in enumerate(seq):
        t, j = divmod(i, 6)
        p = sum(float(block[t, m]) for m, km in enumerate(kmers) if km[j] == base)
        total += np.log(p)
        n += 1
    assert got == pytest.approx(total / n, abs=1e-5)


def test_block_softmax_token_score_differs(carbon: Carbon, human_dna: str) -> None:
    """Carbon.score(level="token") normalises over the k-mer block only: a different number."""
    seq = human_dna[:600]
    block = carbon.score(seq, level="token").mean
    full = sequence_loglik(carbon, [seq], level="token")[0]
    assert full < block  # the full softmax also spends mass on BPE/tag rows


def test_errors(carbon: Carbon, human_dna: str) -> None:
    too_long = human_dna[: 6 * (carbon.context_length + 5)]
    with pytest.raises(ValueError, match="sequence 1"):
        sequence_loglik(carbon, ["ACGTAC", too_long], level="token")
    got = sequence_loglik(carbon, ["ACGTACGGA", too_long], level="bp", on_error="nan")
    assert np.isfinite(got[0]) and np.isnan(got[1])
    with pytest.raises(ValueError, match="prefix"):
        sequence_loglik(carbon, ["ACGTAC"], level="token", prefix="<s>")
