"""Packed tails forked from a parent equal the decoder's own forward of each edited sequence: the
parent's hidden states, and every tail position of groups of different starts and sizes packed in
one forward (including the first and last input positions)."""

from __future__ import annotations

import numpy as np
import torch

from hexamer.carbon import Carbon
from hexamer.design.optimise.tail_forward import Group, TailRunner


def _hidden(carbon: Carbon, ids: torch.Tensor) -> torch.Tensor:
    out = carbon.backend.model(ids[None], logits_at="none", return_hidden=True)
    assert out.hidden is not None
    return out.hidden[0]


def test_parent_and_packed_tails_equal_their_own_forward(tiny_carbon: Carbon) -> None:
    backend = tiny_carbon.backend
    lay = backend.layout
    rng = np.random.default_rng(3)
    t_all = 9
    inputs = torch.tensor([lay.begin_id, *(lay.kmer_start + rng.integers(0, 4096, t_all - 1)).tolist()])
    runner = TailRunner(backend.model, inputs)
    assert torch.allclose(runner.parent(), _hidden(tiny_carbon, inputs), atol=1e-5)
    starts = [1, 4, 4, t_all - 1]  # the first 6-mer, a middle one twice, the last input position
    groups = [
        Group(s, torch.tensor(lay.kmer_start + rng.integers(0, 4096, n)))
        for s, n in zip(starts, [3, 2, 1, 2], strict=True)
    ]
    got = runner.tails(groups)
    off = 0
    for g in groups:
        for first in g.first.tolist():
            edited = inputs.clone()
            edited[g.start] = first
            want = _hidden(tiny_carbon, edited)[g.start :]
            assert torch.allclose(got[off : off + len(want)], want, atol=1e-5)
            off += len(want)
    assert off == len(got)
