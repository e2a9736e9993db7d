"""LocalBackend: its operations against plain forwards of the model (the definitions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.backend import Backend, LocalBackend, PrefixSharingBackend
from hexamer.fns import log_base_marginals, score_bases

RNG = np.random.default_rng(5)


def _dna(n: int) -> str:
    return "".join(RNG.choice(list("ACGT"), n))


def test_declares_what_it_can_do(carbon: Carbon) -> None:
    backend = carbon.backend
    assert isinstance(backend, LocalBackend)
    assert isinstance(backend, Backend) and isinstance(backend, PrefixSharingBackend)
    assert backend.kind == "local" and backend.supports_kv_sharing and backend.supports_embeddings
    assert backend.max_prompt_tokens == backend.context_length == carbon.context_length
    assert backend.hidden_size == carbon.model.config.hidden_size


def test_kmer_logits_are_the_model_forward(carbon: Carbon) -> None:
    ids = carbon.dna_inputs(_dna(60)).ids
    with torch.inference_mode():
        full = carbon.model(torch.tensor([ids]), logits_at="all").logits[0]
    lay = carbon.layout
    got = carbon.backend.kmer_logits([ids])[0]
    assert torch.allclose(got, full[:, lay.kmer_start : lay.kmer_stop].float(), atol=1e-5)


def test_window_log_likelihood_is_the_sum_of_per_base_scores(carbon: Carbon) -> None:
    seqs = [_dna(97), _dna(30) + "NNNN" + _dna(20)]
    lls = carbon.backend.window_log_likelihoods(seqs)
    for seq, ll in zip(seqs, lls, strict=True):
        ids, start, targets, n_real, _ = carbon.dna_inputs(seq, validate=False)
        pred = carbon.backend.kmer_logits([ids])[0, start - 1 : start - 1 + len(targets)]
        tgt = torch.from_numpy(np.where(n_real > 0, targets, 0))
        s = score_bases(pred.double(), tgt, torch.from_numpy(n_real))
        assert ll == pytest.approx(float(s.per_base[s.base_mask].sum()), abs=1e-9)


def test_shared_prefix_differences_equal_full_window_differences(carbon: Carbon) -> None:
    base = _dna(240)
    group = [
        base,
        base[:120] + ("A" if base[120] != "A" else "C") + base[121:],
        base[:200] + "TTT" + base[203:],
    ]
    (sums,) = carbon.backend.shared_prefix_log_likelihoods([group], batch_size=2, token_budget=4096)
    full = carbon.backend.window_log_likelihoods(group)
    for i in (1, 2):
        assert sums[i] - sums[0] == pytest.approx(full[i] - full[0], abs=1e-5)


def test_next_base_marginals_at_offsets_equal_one_context_at_a_time(carbon: Carbon) -> None:
    seq = _dna(180)
    offsets = [0, 60, 66, 174]
    many = carbon.backend.next_base_log_marginals_at(seq, offsets)
    one = carbon.backend.next_base_log_marginals([seq[:p] for p in offsets])
    for a, b in zip(many, one, strict=True):
        assert a.dtype == torch.float64 and a.shape == (4,)
        assert torch.allclose(a, b, atol=1e-5)
    # the definition: the FNS first-base marginal of the next token after <dna>context
    ids = [carbon.layout.begin_id, *carbon.dna_inputs(seq[:60]).ids[1:]]
    with torch.inference_mode():
        logits = carbon.model(torch.tensor([ids]), logits_at="last").logits[0]
    lay = carbon.layout
    want = log_base_marginals(logits[None, lay.kmer_start : lay.kmer_stop].double())[0, 0]
    assert torch.allclose(one[1], want, atol=1e-6)


def test_hidden_states_feed_embeddings(carbon: Carbon) -> None:
    ids = [carbon.layout.begin_id, *carbon.dna_inputs(_dna(36)).ids[1:], carbon.layout.end_id]
    h = carbon.backend.hidden_states([ids], carbon.backend.num_layers)
    assert h.shape == (1, len(ids), carbon.backend.hidden_size) and h.dtype == torch.float32
    vec = carbon.embed(_dna(36))
    assert vec.shape == (carbon.backend.hidden_size,)


def test_fingerprint_follows_the_weights(carbon: Carbon, tiny_folder) -> None:
    again = Carbon.from_pretrained(tiny_folder)
    assert again.fingerprint() == carbon.fingerprint() == carbon.backend.fingerprint()
    with torch.no_grad():
        next(again.model.parameters()).add_(1.0)
    assert again.backend.fingerprint() != carbon.fingerprint()
