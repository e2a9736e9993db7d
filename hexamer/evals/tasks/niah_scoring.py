"""Genome-NIAH model side: the published ``--with_yarn`` RoPE override and the value
log-likelihoods (the prompt run once, its KV cache shared by every candidate value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from hexamer.model import KVCache, RopeConfig
from hexamer.tokenizer.dna import encode_dna
from hexamer.tokenizer.segment import OPEN_TAG
from hexamer.tokenizer.tags import check_prefix

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["YARN_DEFAULTS", "prefix_ids", "value_logliks", "yarn_carbon"]

#: the published ``--with_yarn`` override
YARN_DEFAULTS = {"yarn_factor": 4.0, "yarn_original": 32768, "yarn_max_positions": 65536}


def yarn_carbon(
    carbon: Carbon,
    *,
    factor: float = 4.0,
    original_max_position_embeddings: int = 32768,
    max_position_embeddings: int = 65536,
) -> Carbon:
    """``carbon`` with the published ``--with_yarn`` override (rope theta kept), weights shared."""
    rope = RopeConfig(
        rope_type="yarn",
        theta=carbon.model.config.rope.theta,
        factor=float(factor),
        original_max_position_embeddings=int(original_max_position_embeddings),
    )
    return carbon.with_rope(rope, max_position_embeddings=int(max_position_embeddings))


def prefix_ids(carbon: Carbon, prefix: str) -> list[int]:
    if not prefix.endswith(OPEN_TAG):
        raise ValueError(f"prefix must end with {OPEN_TAG!r}, got {prefix!r}")
    head = check_prefix(prefix[: -len(OPEN_TAG)])  # metadata tags only, as everywhere
    ids = carbon.tokenizer.encode(head) if head else []
    return [*ids, carbon.layout.begin_id]


@torch.inference_mode()
def value_logliks(
    carbon: Carbon,
    prompt: str,
    values: Sequence[str],
    *,
    level: Literal["token", "bp"] = "token",
    prefix: str = "<dna>",
) -> list[float]:
    """Mean log-probability of each ``value``'s tokens (token level, full-vocabulary log-softmax)
    or bases (bp level, FNS log-marginals) right after ``prefix + prompt``.

    ``prompt`` must be a multiple of 6 bp (the value starts on a token boundary). The prompt is run
    once; its KV cache is copied to one row per value, which then runs only the value tokens.
    """
    layout = carbon.layout
    k = layout.k
    if len(prompt) % k:
        raise ValueError(f"prompt length {len(prompt)} is not a multiple of {k}")
    lengths = {len(v) for v in values}
    if len(lengths) > 1:  # one shared batch needs equal lengths; rare, so score one at a time
        return [value_logliks(carbon, prompt, [v], level=level, prefix=prefix)[0] for v in values]
    ids = prefix_ids(carbon, prefix) + encode_dna(prompt, layout).ids.tolist()
    encs = [encode_dna(v, layout) for v in values]
    n_val = len(encs[0].ids)
    if n_val == 0:
        return [float("nan")] * len(values)
    if len(ids) + n_val > carbon.context_length:
        raise ValueError(
            f"prompt ({len(ids)} tokens) + value ({n_val}) exceeds the model's context of {carbon.context_length}"
        )
    model = carbon.model
    device = model.device
    rows = len(values)
    cache = KVCache.for_model(model, rows, len(ids) + n_val)
    out = model(
        torch.tensor([ids], device=device),
        kv_cache=cache,
        cache_rows=[0],
        logits_at="none",
        return_hidden=True,
    )
    assert out.hidden is not None
    first = out.hidden[:, -1:].expand(rows, 1, -1)  # predicts every value's first token
    if n_val > 1:
        cache.broadcast(0)
        body = torch.tensor([e.ids[:-1].tolist() for e in encs], device=device)
        rest = model(body, kv_cache=cache, logits_at="none", return_hidden=True).hidden
        assert rest is not None
        hidden = torch.cat([first, rest], dim=1)
    else:
        hidden = first
    targets = torch.tensor(np.stack([e.ids for e in encs]), dtype=torch.int64, device=device)
    if level == "token":
        logits = model.compute_logits(hidden)  # (rows, n_val, vocab) float32
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[..., None]).squeeze(-1)
        ok = torch.tensor(np.stack([e.n_real == k for e in encs]), device=device)
        return [float(logp[r][ok[r]].mean()) if bool(ok[r].any()) else float("nan") for r in range(rows)]
    from hexamer.fns import score_bases

    kmer = model.compute_logits(hidden, (layout.kmer_start, layout.kmer_stop))
    out_values = []
    for r, e in enumerate(encs):
        real = torch.from_numpy(e.n_real.astype(np.int64)).to(device)
        tgt = torch.where(real > 0, targets[r] - layout.kmer_start, 0)
        s = score_bases(kmer[r], tgt, real)
        out_values.append(float(s.mean) if int(s.n_bases) else float("nan"))
    return out_values
