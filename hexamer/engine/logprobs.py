"""Full-vocabulary log-probabilities for text-mode requests: sampled tokens and prompt tokens.

Prompt log-probabilities with a large top-N (a client may ask for all 4,096 6-mers to marginalise
them itself) are computed from the prompt's final hidden states in chunks of positions, so the
``(positions, vocabulary)`` log-softmax never has to exist at once: one prefill, one LM-head matmul
per chunk, one ``topk``.
"""

from __future__ import annotations

import numpy as np
import torch

from hexamer.engine.request import TokenLogprobs
from hexamer.model import LlamaModel
from hexamer.model.finite import finite_rows

#: float32 elements of one chunk of log-softmax rows (64 MiB)
CHUNK_ELEMENTS = 1 << 24
#: token ids and ranks are kept as int32 (a vocabulary is far below 2**31): a top-4096 answer of
#: thousands of positions holds its ids beside the float32 values, so int64 would be half of it
ID_DTYPE = np.int32


def logprobs_of(logits: torch.Tensor, targets: torch.Tensor, top_n: int) -> TokenLogprobs:
    """Log-probability, rank and top-N of ``targets`` ``(T,)`` under ``logits`` ``(T, V)``; a NaN or
    infinite logit makes the result not ``finite`` (the rule of a generation's logits)."""
    finite = bool(finite_rows(logits).all())
    lp = torch.log_softmax(logits.to(torch.float32), dim=-1)
    tgt = targets.to(device=lp.device, dtype=torch.int64)
    chosen = lp.gather(1, tgt[:, None])[:, 0]
    rank = (lp >= chosen[:, None]).sum(-1)
    n = min(top_n, lp.shape[-1])
    if n > 0:
        top = torch.topk(lp, n, dim=-1, sorted=True)
        top_lp, top_ids = top.values, top.indices
    else:
        top_lp = lp.new_zeros((lp.shape[0], 0))
        top_ids = torch.zeros((lp.shape[0], 0), dtype=torch.int64, device=lp.device)
    return TokenLogprobs(
        token_ids=tgt.cpu().numpy().astype(ID_DTYPE),
        logprob=chosen.cpu().numpy(),
        rank=rank.cpu().numpy().astype(ID_DTYPE),
        top_ids=top_ids.to(torch.int32).cpu().numpy(),
        top_logprobs=top_lp.cpu().numpy(),
        finite=finite,
    )


def concat(parts: list[TokenLogprobs]) -> TokenLogprobs:
    """One record of consecutive chunks' rows (one chunk, most prompts: itself, not a copy)."""
    if len(parts) == 1:
        return parts[0]
    return TokenLogprobs(
        token_ids=np.concatenate([p.token_ids for p in parts]),
        logprob=np.concatenate([p.logprob for p in parts]),
        rank=np.concatenate([p.rank for p in parts]),
        top_ids=np.concatenate([p.top_ids for p in parts]),
        top_logprobs=np.concatenate([p.top_logprobs for p in parts]),
        finite=all(p.finite for p in parts),
    )


def prompt_logprobs(
    model: LlamaModel, hidden: torch.Tensor, prompt_ids: list[int], top_n: int
) -> TokenLogprobs:
    """Logprobs of prompt tokens 1..L-1 from the final hidden states ``(L, H)`` of the prompt
    (position i predicts token i + 1); the LM head runs chunk by chunk."""
    targets = torch.tensor(prompt_ids[1:], dtype=torch.int64)
    if len(targets) == 0:
        empty = np.zeros((0,), dtype=np.float32)
        return TokenLogprobs(
            token_ids=np.zeros((0,), dtype=ID_DTYPE),
            logprob=empty,
            rank=np.zeros((0,), dtype=ID_DTYPE),
            top_ids=np.zeros((0, 0), dtype=ID_DTYPE),
            top_logprobs=np.zeros((0, 0), dtype=np.float32),
        )
    step = max(1, CHUNK_ELEMENTS // model.config.vocab_size)
    parts = []
    for start in range(0, len(targets), step):
        h = hidden[start : min(start + step, len(targets))]
        parts.append(logprobs_of(model.compute_logits(h), targets[start : start + len(h)], top_n))
    return concat(parts)
