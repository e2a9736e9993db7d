"""The single-edit scorer equals each edited sequence's own forward through the library's float64
FNS scorer (``Backend.window_log_likelihoods``), chunked or not, with a partial last 6-mer; its
float32 per-position terms equal ``bp_log_likelihoods`` even where a target's mass underflows."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hexamer.carbon import Carbon
from hexamer.design.optimise import EditRules
from hexamer.design.optimise.edit_scores import FnsTerms, edit_log_likelihoods, one_forward_each
from hexamer.design.optimise.edits import apply_edit
from hexamer.fns.likelihood import bp_log_likelihoods


@pytest.mark.parametrize(("length", "batch_size", "budget"), [(25, 64, 16384), (31, 5, 40)])
def test_edits_equal_their_own_forward(
    tiny_carbon: Carbon, length: int, batch_size: int, budget: int
) -> None:
    rng = np.random.default_rng(length)
    seq = "".join(rng.choice(list("ACGT"), length))
    edits = EditRules.make(seq).single_edits(seq)  # every token, the partial last one included
    backend = tiny_carbon.backend
    got = edit_log_likelihoods(backend, seq, edits, batch_size=batch_size, token_budget=budget)
    seqs = [apply_edit(seq, p, b) for p, b in edits]
    stock = np.array(backend.window_log_likelihoods(seqs))
    assert np.abs(got - stock).max() < 1e-4
    assert np.abs(one_forward_each(backend, seqs) - stock).max() < 1e-4


@pytest.mark.parametrize(
    ("length", "batch_size", "budget"), [(6, 4096, 2048), (13, 4096, 2048), (37, 7, 20), (40, 4096, 9)]
)
def test_any_edits_in_any_order_equal_one_forward_each(
    tiny_carbon: Carbon, length: int, batch_size: int, budget: int
) -> None:
    """Lengths that fill their last 6-mer or not; edits in the first and last 6-mers, a subset in
    shuffled order with a repeat; forwards that split a 6-mer's edits and mix 6-mers."""
    rng = np.random.default_rng(length + 100)
    seq = "".join(rng.choice(list("ACGT"), length))
    every = EditRules.make(seq).single_edits(seq)
    first = [e for e in every if e[0] < 6]
    last = [e for e in every if e[0] >= (length - 1) // 6 * 6]
    middle = [every[i] for i in rng.choice(len(every), min(len(every), 10), replace=False)]
    edits = [*last, *middle, *first, first[0]]
    backend = tiny_carbon.backend
    got = edit_log_likelihoods(backend, seq, edits, batch_size=batch_size, token_budget=budget)
    want = one_forward_each(backend, [apply_edit(seq, p, b) for p, b in edits])
    assert np.abs(got - want).max() < 1e-4
    assert got[-1] == got[len(last) + len(middle)]


def test_no_edits_and_bad_input(tiny_carbon: Carbon) -> None:
    backend = tiny_carbon.backend
    assert edit_log_likelihoods(backend, "ACGTACGTAC", []).shape == (0,)
    with pytest.raises(ValueError, match="A/C/G/T"):
        edit_log_likelihoods(backend, "ACGTNCGTAC", [(0, "C")])
    with pytest.raises(ValueError, match="edits"):
        edit_log_likelihoods(backend, "ACGTACGTAC", [(10, "C")])
    with pytest.raises(ValueError, match="edits"):
        edit_log_likelihoods(backend, "ACGTACGTAC", [(1, "N")])


def test_terms_equal_the_float64_recipe_even_on_underflow(tiny_carbon: Carbon) -> None:
    fns = FnsTerms(tiny_carbon.backend)
    fns.model = SimpleNamespace(compute_logits=lambda hidden, rows: hidden)  # type: ignore[assignment]
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 4096, generator=gen) * 3
    targets = torch.tensor([0, 4095, 1234, 77, 2048, 9])
    n_real = torch.tensor([6, 6, 3, 1, 0, 6])
    logits[5] = 0.0
    logits[5, targets[5]] = -150.0  # its first bases are shared by others; only its base 5...
    logits[5, (torch.arange(4096) % 4) == int(targets[5]) % 4] = -150.0  # ...has all its mass ~150 nats down
    got = fns.terms(logits, targets, n_real)
    want = bp_log_likelihoods(logits, targets.numpy(), n_real.numpy(), [1] * 6)
    assert np.isfinite(got.numpy()).all()
    assert np.abs(got.numpy() - np.array(want)).max() < 1e-4
