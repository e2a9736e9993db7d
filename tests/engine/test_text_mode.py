"""Whole-vocabulary (mode="text") requests share steps with DNA requests without changing them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from hexamer import Carbon
from hexamer.engine import Request, SamplingParams


def _dna_requests(carbon: Carbon) -> list[Request]:
    out = []
    for i, (prompt, n) in enumerate([("ACGTAC", 20), ("TTGACATTGACA", 13), ("GGGCC", 31)]):
        p = carbon.parse_prompt(prompt, i)
        mode = "token" if i == 1 else "bp"
        out.append(
            Request(p.ids, SamplingParams(mode=mode, max_bp=n, seed=3 + i, top_p=0.9), forced=p.forced)
        )
    return out


def _text_requests(carbon: Carbon, seed: int = 5) -> list[Request]:
    ids = carbon.tokenizer.encode("hello <dna>ACGTAC")
    return [
        Request(list(ids), SamplingParams(mode="text", max_new_tokens=9, seed=seed + j, top_k=50, min_p=0.01))
        for j in range(2)
    ] + [Request(list(ids), SamplingParams(mode="text", max_new_tokens=7, temperature=0))]


def test_dna_outputs_unchanged_by_text_rows(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=8)
    alone = _dna_requests(carbon)
    carbon.engine.run(alone)
    text_alone = _text_requests(carbon)
    carbon.engine.run(text_alone)
    mixed_dna, mixed_text = _dna_requests(carbon), _text_requests(carbon)
    carbon.engine.run([mixed_text[0], *mixed_dna, *mixed_text[1:]])
    assert [r.bases() for r in mixed_dna] == [r.bases() for r in alone]
    assert [r.output_ids for r in mixed_text] == [r.output_ids for r in text_alone]
    assert all(len(r.output_ids) == r.n_tokens for r in mixed_text)


def test_text_greedy_equals_full_forward_argmax(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder)
    ids = carbon.tokenizer.encode("abc <dna>ACG")
    req = Request(list(ids), SamplingParams(mode="text", max_new_tokens=6, temperature=0, logprobs=3))
    carbon.engine.run([req])
    seq = list(ids)
    for t in range(6):
        with torch.inference_mode():
            logits = carbon.model(torch.tensor([seq]), logits_at="last").logits[0]
        lp = torch.log_softmax(logits.double(), -1)
        assert req.output_ids[t] == int(lp.argmax())
        assert float(req.logprobs[t].logprob[0]) == pytest.approx(float(lp.max()), abs=1e-5)
        assert req.logprobs[t].top_ids[0].tolist() == lp.topk(3).indices.tolist()
        seq.append(req.output_ids[t])


def test_text_options_refused_in_dna_modes() -> None:
    with pytest.raises(ValueError, match="only apply to mode='text'"):
        SamplingParams(max_bp=5, logprobs=2)
    with pytest.raises(ValueError, match="takes max_new_tokens"):
        SamplingParams(mode="text", max_bp=5)


def test_prompt_logprobs_are_compact_and_not_kept_by_the_engine(tiny_folder: Path) -> None:
    """Token ids and ranks are int32 beside float32 values (a vocabulary is far below 2**31), and
    once the last step is handed over the engine holds no finished request: an idle server does
    not keep the last answer's arrays."""
    import gc
    import weakref

    carbon = Carbon.from_pretrained(tiny_folder)
    ids = carbon.tokenizer.encode("<dna>" + "ACGTAC" * 8)
    req = Request(list(ids), SamplingParams(mode="text", max_new_tokens=1, temperature=0, prompt_logprobs=7))
    outputs: list[list[Request]] = []
    carbon.engine.run([req], on_step=outputs.append)
    lp = req.prompt_logprobs
    assert lp is not None and lp.finite and len(lp) == len(ids) - 1
    assert (lp.token_ids.dtype, lp.rank.dtype, lp.top_ids.dtype) == (np.int32,) * 3
    assert lp.top_logprobs.dtype == np.float32 and lp.top_ids.shape == (len(ids) - 1, 7)
    assert lp.token_ids.tolist() == ids[1:]
    assert outputs == [[req]]  # handed over by the step that finished it
    gone = weakref.ref(req)
    del req, lp, outputs
    gc.collect()
    assert gone() is None
