"""The start-up self-check behind ``/health``: can this model give finite outputs at all?

The loader refuses NaN/inf weights, but finite weights can still overflow at run time (float16,
bfloat16, a huge weight). One tiny forward at start-up (a 48-bp ``<dna>`` sequence, the whole
vocabulary's logits at every position; milliseconds next to the load) tells a model that
cannot score anything; ``/health`` then answers 503 with the reason, so a load balancer keeps
traffic away. Requests that still reach it answer a clear error of their own (a ``failed`` row, or
a 500 naming the non-finite output), as do requests whose own inputs overflow a healthy model.
"""

from __future__ import annotations

import torch

from hexamer.engine import Engine
from hexamer.model.finite import finite_rows, non_finite_output
from hexamer.tokenizer import CarbonTokenizer

__all__ = ["SELF_CHECK_DNA", "self_check"]

#: the sequence the self-check runs (8 whole 6-mers)
SELF_CHECK_DNA = "ACGTTGCAGGCTAGCTTACGATCGGATCCATGCAAGCTTGAATTCGCA"


@torch.inference_mode()
def self_check(engine: Engine, tokenizer: CarbonTokenizer) -> str | None:
    """``None`` when the serving engine's model (and its draft model, if any) give finite logits
    for :data:`SELF_CHECK_DNA`, else the reason the server is not healthy."""
    ids = tokenizer.encode_dna(SELF_CHECK_DNA).tolist()
    for name, model in (("model", engine.model), ("draft model", engine.draft_model)):
        if model is None:
            continue
        logits = model(torch.tensor([ids], device=model.device), logits_at="all").logits
        if logits is None or not bool(finite_rows(logits).all()):
            return f"start-up self-check of the {name}: " + non_finite_output("logits")
    return None
