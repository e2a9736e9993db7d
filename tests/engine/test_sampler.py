"""DNA-mode sampling options against transformers' own logits processors and warpers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hexamer.engine import Request, SamplingParams
from hexamer.engine.sampler import kmer_filter, repetition_penalised, sample_next

transformers = pytest.importorskip("transformers")


def _logits(seed: int = 0, rows: int = 3, n: int = 4**6) -> torch.Tensor:
    return torch.randn(rows, n, generator=torch.Generator().manual_seed(seed)) * 3


@pytest.mark.parametrize("top_k", [1, 7, 300])
def test_top_k_keeps_what_transformers_keeps(top_k: int) -> None:
    x = _logits(1)
    ours = kmer_filter(x, None, temperature=0.7, top_k=top_k, min_p=0.0)
    theirs = transformers.TopKLogitsWarper(top_k)(None, x.clone())
    assert torch.equal(ours, torch.isfinite(theirs))


@pytest.mark.parametrize("min_p", [0.01, 0.2])
def test_min_p_keeps_what_transformers_keeps(min_p: float) -> None:
    x = _logits(2).double()
    ours = kmer_filter(x, None, temperature=1.0, top_k=0, min_p=min_p)
    theirs = transformers.MinPLogitsWarper(min_p)(None, x.clone())
    assert torch.equal(ours, torch.isfinite(theirs))


def test_repetition_penalty_is_transformers_rule() -> None:
    x = _logits(3, rows=1)
    prompt_kmers, output = (5, 17, 4095, 17), [9, 5]
    req = Request([1, 2], SamplingParams(max_bp=60, mode="token", repetition_penalty=1.7))
    req.prompt_kmers, req.output_kmers = prompt_kmers, list(output)
    ours = repetition_penalised(x, [req])
    ids = torch.tensor([[*prompt_kmers, *output]])
    theirs = transformers.RepetitionPenaltyLogitsProcessor(1.7)(ids, x.clone())
    assert torch.allclose(ours, theirs) and not torch.equal(ours, x)
    assert repetition_penalised(x, [Request([1], SamplingParams(max_bp=6))]) is x  # off: no copy


def test_filters_constrain_the_draws_and_logprobs_are_recorded() -> None:
    x = _logits(4, rows=1)
    logits = torch.cat([torch.full((1, 2), -1e9), x], dim=-1)  # </dna>, <oov>, 6-mers
    top = set(torch.topk(x[0], 3).indices.tolist())
    picks = []
    for seed in range(40):
        p = SamplingParams(max_bp=6, mode="token", top_k=3, seed=seed, return_logprobs=True)
        req = Request([1], p)
        picks.append(sample_next(logits, [req])[0])
        want = torch.log_softmax(x[0].double(), -1)[picks[-1]].item()
        assert req.dna_logprobs[0].tolist() == pytest.approx([want])
    assert set(picks) <= top and len(set(picks)) > 1


@pytest.mark.parametrize(
    "options,message",
    [
        ({"mode": "bp", "top_k": 5}, "mode='token'"),
        ({"mode": "token", "top_k": -1}, "top_k"),
        ({"mode": "token", "min_p": 1.5}, "min_p"),
        ({"repetition_penalty": 0.0}, "repetition_penalty"),
        ({"repetition_penalty": float("nan")}, "repetition_penalty"),
        ({"return_logprobs": 1}, "return_logprobs"),
    ],
)
def test_bad_options_are_refused(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SamplingParams(max_bp=6, **options)


def test_text_mode_keeps_its_options() -> None:
    p = SamplingParams(mode="text", max_new_tokens=3, top_k=4, min_p=0.1, logprobs=2)
    assert (p.top_k, p.min_p, p.logprobs) == (4, 0.1, 2)
    with pytest.raises(ValueError, match="DNA modes"):
        SamplingParams(mode="text", max_new_tokens=3, return_logprobs=True)
    assert np.isclose(SamplingParams(max_bp=6, mode="token", min_p=0.5).min_p, 0.5)


class _Fixed:
    """A chooser that records what it is given and picks fixed bases."""

    def __init__(self, bases: list[int]) -> None:
        self.bases = bases
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []

    def choose(self, log_marginals: np.ndarray, sampling_log_marginals: np.ndarray) -> list[int]:
        self.seen.append((log_marginals, sampling_log_marginals))
        return self.bases


def test_a_chooser_picks_the_bases_from_the_marginals() -> None:
    from hexamer.fns import log_base_marginals

    x = _logits(4, rows=2, n=2 + 4**6)
    free = Request([1], SamplingParams(max_bp=12, mode="bp", temperature=0.5, seed=1))
    chosen = Request([1], SamplingParams(max_bp=12, mode="bp", temperature=0.5, seed=1))
    chooser = _Fixed([3, 0, 1, 2, 2, 0])  # G A T C C A
    chosen.chooser = chooser
    picks = sample_next(x, [free, chosen], k=6)
    digits = [(picks[1] // 4 ** (5 - i)) % 4 for i in range(6)]
    assert digits == chooser.bases
    lm, lmt = chooser.seen[0]
    want = log_base_marginals(x[1:2, 2:].double())[0].numpy()
    np.testing.assert_allclose(lm, want, atol=1e-12)
    np.testing.assert_allclose(lmt, log_base_marginals(x[1:2, 2:].double() / 0.5)[0].numpy(), atol=1e-12)


def test_a_failing_chooser_leaves_no_request_in_the_engine(tiny_folder) -> None:  # type: ignore[no-untyped-def]
    from hexamer import Carbon
    from hexamer.backend.inputs import parse_prompt
    from hexamer.backend.protocol import Decoding

    class Boom:
        def choose(self, log_marginals: np.ndarray, sampling_log_marginals: np.ndarray) -> list[int]:
            raise KeyboardInterrupt

    carbon = Carbon.from_pretrained(tiny_folder)
    b = carbon.backend
    prompt = parse_prompt(b.tokenizer, "<dna>", 0)
    req = b.make_request(prompt, SamplingParams(max_bp=24, mode="bp", seed=0))
    req.chooser = Boom()
    with pytest.raises(KeyboardInterrupt):
        b.generate([req], Decoding())
    assert not b.engine.has_work
    assert carbon.generate(["<dna>"], max_bp=12, seed=0, mode="bp")[0]  # the engine still runs
