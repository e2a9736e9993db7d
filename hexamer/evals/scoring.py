"""Sequence log-likelihood exactly as the published evaluation scripts define it.

Two levels (``shared/spec/evals.md`` §2 and §4):

* ``token`` (the published headline numbers): the DNA is cut to its **first** ``floor(len/6)*6``
  bases, the text ``prefix + dna`` (default ``<dna>``, no closing tag) is tokenised, and the score is
  the mean, over every token after the prefix, of its log-probability under the **full-vocabulary**
  log-softmax (``<oov>`` chunks included: they are tokens like any other).
* ``bp``: the mean over the real bases of the FNS log-marginal ``log P_j(true base)`` (softmax over
  the 6-mer block, marginalised per position), no trimming; this is ``Carbon.score(level="bp")``.

Why not ``Carbon.score(level="token")``: that one normalises over the 4,096-k-mer block only (the
probability mass the model puts on BPE text, tags and EOS is dropped), skips ``<oov>`` tokens and
the padded tail instead of trimming. It ranks sequences almost the same way but is not the number
the published scripts compute, so the evals use :func:`sequence_loglik` instead.

The full-vocabulary log-softmax needs the logsumexp over all ~156k rows at every scored position,
but only the target's logit: the decoder runs once per length-sorted batch (no LM head), then the
LM head is applied to chunks of scored positions, keeping ``(chunk, vocab)`` logits at most.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from hexamer.model import pad_rows
from hexamer.tokenizer.dna import encode_dna
from hexamer.tokenizer.segment import OPEN_TAG
from hexamer.tokenizer.tags import check_prefix

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["LOGIT_CHUNK_ELEMENTS", "sequence_loglik", "token_level_ids", "trim_to_kmers"]

#: at most this many float32 logits are alive at once while taking the full-vocabulary logsumexp
LOGIT_CHUNK_ELEMENTS = 1 << 26  # 256 MiB


def trim_to_kmers(dna: str, k: int = 6) -> str:
    """The first ``floor(len/k)*k`` bases (the published scripts keep the start of the sequence)."""
    return dna[: len(dna) - len(dna) % k]


def _prefix_text(prefix: str) -> str:
    if not prefix.endswith(OPEN_TAG):
        raise ValueError(
            f"prefix must end with {OPEN_TAG!r} (optionally after metadata tags), got {prefix!r}: "
            "DNA outside <dna> is read as English BPE text"
        )
    return check_prefix(prefix[: -len(OPEN_TAG)])


def token_level_ids(carbon: Carbon, sequence: str, prefix: str = "<dna>") -> tuple[list[int], int]:
    """Token ids of ``prefix + trimmed DNA`` and the number of prefix tokens (never scored)."""
    head = _prefix_text(prefix)
    ids = carbon.tokenizer.encode(head) if head else []
    ids.append(carbon.layout.begin_id)
    n_prefix = len(ids)
    dna = trim_to_kmers(sequence.strip(), carbon.layout.k)
    if dna:
        ids.extend(encode_dna(dna, carbon.layout).ids.tolist())
    return ids, n_prefix


@torch.inference_mode()
def _token_batch(carbon: Carbon, rows: list[tuple[list[int], int]]) -> list[float]:
    """Mean full-vocabulary log-prob of the tokens after the prefix, for right-padded rows."""
    model = carbon.model
    device = model.device
    padded = pad_rows([ids for ids, _ in rows], carbon.tokenizer.pad_token_id or 0)
    out = model(
        padded.ids_on(device),
        attention_mask=padded.mask_on(device),
        logits_at="none",
        return_hidden=True,
    )
    hidden = out.hidden
    assert hidden is not None
    # scored (row, position) pairs: position p predicts token p + 1, for targets after the prefix
    row_idx: list[int] = []
    pos_idx: list[int] = []
    targets: list[int] = []
    for r, (ids, n_prefix) in enumerate(rows):
        n = len(ids) - n_prefix
        row_idx.extend([r] * n)
        pos_idx.extend(range(n_prefix - 1, len(ids) - 1))
        targets.extend(ids[n_prefix:])
    if not targets:
        return [float("nan")] * len(rows)
    picked = hidden[torch.tensor(row_idx, device=device), torch.tensor(pos_idx, device=device)]
    tgt = torch.tensor(targets, dtype=torch.int64, device=device)
    vocab = model.head_weight.shape[0]
    chunk = max(1, LOGIT_CHUNK_ELEMENTS // vocab)
    logp = torch.empty(len(targets), dtype=torch.float64, device=device)
    for a in range(0, len(targets), chunk):
        logits = model.compute_logits(picked[a : a + chunk])  # float32 (matmul in the weight dtype)
        lse = torch.logsumexp(logits, dim=-1)
        logp[a : a + chunk] = (logits.gather(-1, tgt[a : a + chunk, None]).squeeze(-1) - lse).double()
    sums = torch.zeros(len(rows), dtype=torch.float64, device=device)
    sums.index_add_(0, torch.tensor(row_idx, device=device), logp)
    counts = [len(ids) - n_prefix for ids, n_prefix in rows]
    return [float(s) / c if c else float("nan") for s, c in zip(sums.cpu().tolist(), counts, strict=True)]


def _batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices sorted by length (longest first, so a too-large batch fails early), ``batch_size`` each."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[a : a + batch_size] for a in range(0, len(order), batch_size)]


def sequence_loglik(
    carbon: Carbon,
    sequences: Sequence[str],
    *,
    level: Literal["token", "bp"],
    batch_size: int = 16,
    prefix: str = "<dna>",
    on_error: Literal["raise", "nan"] = "raise",
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Mean log-likelihood of each DNA sequence, float64, in input order (see the module docstring).

    ``prefix`` is text ending in ``<dna>`` (e.g. ``"<mammalian_species><dna>"``). A sequence with
    nothing to score (token level: shorter than 6 bp) gets NaN. With ``on_error="nan"`` a sequence
    that cannot be scored (too long for the model, not a string) also gets NaN instead of raising,
    so a batch job survives one bad record. ``on_batch(n)`` is called after each batch of n.
    """
    if level not in ("token", "bp"):
        raise ValueError(f"level must be 'token' or 'bp', got {level!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    head = _prefix_text(prefix)
    out = np.full(len(sequences), np.nan, dtype=np.float64)
    limit = carbon.context_length

    def fail(i: int, msg: str) -> None:
        if on_error == "raise":
            raise ValueError(f"sequence {i}: {msg}")

    if level == "token":
        rows: dict[int, tuple[list[int], int]] = {}
        for i, seq in enumerate(sequences):
            if not isinstance(seq, str):
                fail(i, f"is a {type(seq).__name__}, expected str")
                continue
            ids, n_prefix = token_level_ids(carbon, seq, prefix)
            if len(ids) > limit:
                fail(i, f"needs {len(ids)} tokens, more than the model's context of {limit}")
                continue
            rows[i] = (ids, n_prefix)
        keys = list(rows)
        for group in _batches([len(rows[i][0]) for i in keys], batch_size):
            index = [keys[g] for g in group]
            for i, value in zip(index, _token_batch(carbon, [rows[i] for i in index]), strict=True):
                out[i] = value
            if on_batch is not None:
                on_batch(len(index))
        return out

    ok: list[int] = []
    for i, seq in enumerate(sequences):
        try:
            carbon.check_sequence(seq, prefix=head)
        except (TypeError, ValueError) as exc:
            fail(i, str(exc).removeprefix("sequence 0 ").removeprefix("sequence 0: "))
            continue
        ok.append(i)
    lengths = [len(sequences[i]) for i in ok]
    for group in _batches(lengths, batch_size):
        index = [ok[g] for g in group]
        budget = batch_size * (max(len(sequences[i]) for i in index) // carbon.layout.k + 2 + len(head))
        results = carbon.score([sequences[i] for i in index], level="bp", prefix=head, token_budget=budget)
        for i, res in zip(index, results, strict=True):
            out[i] = res.mean
        if on_batch is not None:
            on_batch(len(index))
    return out
