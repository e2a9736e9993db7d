"""The FNS (Factorised Nucleotide Supervision) training loss on full-vocabulary logits.

For a position whose label is a k-mer ``y``, FNS replaces the token cross-entropy by the mean over
its bases of ``-log P_j(y_j)``, where ``P_j`` is the marginal of base j under the model's
distribution. Two variants, chosen by ``reference_bug``:

**Corrected (default, ``reference_bug=False``)** - the pretraining-loss semantics (Carbon report;
the token_mask-aware nanotron loss):

* numerator ``sum_{v k-mer, v_j = b} exp(z_v)`` over the 4**k k-mer rows only; denominator the
  logsumexp over the **full vocabulary**, as in the pretraining loss. The four marginals of a
  position therefore sum to P(next token is a k-mer), and the loss also pushes probability mass
  out of non-DNA tokens. Everything is computed in float32 log space (no clamping needed);
* a tail token's padded positions ``j >= valid_len`` carry no real base and are not supervised;
* labels equal to ``ignore_index`` or listed in ``ignore_ids`` (pass the tag and ``<oov>`` ids,
  e.g. ``<dna>``, ``</dna>``, ``<oov>``) are never supervised; the remaining non-k-mer labels
  (BPE text) are ignored (``non_kmer="ignore"``) or get token cross-entropy
  (``non_kmer="token_ce"``);
* reduction: ``loss = (sum of base NLLs + sum of token CEs) / (n_bases + n_ce_tokens)``.

It is the default because the reference variant is biased: it reads "A" wherever the model puts
mass on a non-DNA token, and it trains the model to predict the padding 'A's of tail tokens.

**Reference (``reference_bug=True``)** - the public ``FNSTrainer`` of huggingface/carbon,
reproduced on purpose so its numbers can be matched:

* softmax over the full vocabulary in the logits' dtype; the marginal for base b at position j
  sums the probabilities of all vocabulary rows whose base at j is b, where **every non-k-mer row
  (BPE, tags, ``<oov>``, ``<unused_i>``) counts as base 'A' at every position** - so P_j(A)
  absorbs all non-DNA probability; marginals in a float32 buffer, clamped at 1e-8, then logged;
* no tail masking (``valid_len`` is ignored): all k positions are supervised;
* ``ignore_ids`` should be ``(oov_id, pad_id)`` to match the trainer, which ignores those labels;
  other non-k-mer labels (including ``<dna>``/``</dna>``) get token CE;
* ``bp_loss`` = mean over j of the per-position mean NLL; ``token_loss`` = mean CE / k;
  ``loss = (bp_loss * n_kmer + token_loss * n_ce) / (n_kmer + n_ce)`` for ``non_kmer="token_ce"``
  and ``loss = bp_loss`` for ``non_kmer="ignore"`` (the trainer's ``dna_loss_only``). The trainer
  also divides the combined loss by ``gradient_accumulation_steps``; that is left to the caller.

Labels are aligned with logits (``logits[..., t, :]`` predicts ``labels[..., t]``) unless
``shift=True``, which applies the usual causal shift (``logits[..., :-1]`` vs ``labels[..., 1:]``,
``valid_len[..., 1:]``). If nothing is supervised the loss is a zero that still has a gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from hexamer.fns.marginals import _log_base_mass, compute_dtype
from hexamer.fns.tables import kmer_digits

__all__ = ["FnsLoss", "fns_loss"]


@dataclass(frozen=True)
class FnsLoss:
    """Result of :func:`fns_loss`. ``loss`` is what to backpropagate; the rest is for logging.

    ``bp_loss``: mean NLL per supervised base. ``token_loss``: mean CE per CE token (divided by k
    in the reference variant, as the trainer does). Counts are 0-dim long tensors: ``n_bases``
    (supervised bases), ``n_kmer_tokens`` (k-mer label positions), ``n_ce_tokens``.
    """

    loss: torch.Tensor
    bp_loss: torch.Tensor
    token_loss: torch.Tensor
    n_bases: torch.Tensor
    n_kmer_tokens: torch.Tensor
    n_ce_tokens: torch.Tensor


def _safe_div(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    return num / den.clamp(min=1).to(num.dtype)


def fns_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    *,
    kmer_start: int,
    k: int = 6,
    valid_len: torch.Tensor | None = None,
    non_kmer: Literal["ignore", "token_ce"] = "ignore",
    ignore_ids: Sequence[int] = (),
    ignore_index: int = -100,
    reference_bug: bool = False,
    shift: bool = False,
) -> FnsLoss:
    """FNS loss of full-vocabulary ``logits`` ``(..., V)`` against token ``labels`` ``(...)``.

    ``kmer_start``: id of the first k-mer (151672 for Carbon); the k-mers occupy
    ``[kmer_start, kmer_start + 4**k)`` in ATCG product order. ``valid_len`` ``(...)``: real bases
    in each label token (the tokenizer's ``token_mask`` aligned with labels; values <= 0 at a
    k-mer label supervise nothing; ``None`` = k everywhere). See the module docstring for the two
    variants; the corrected one is the default.
    """
    if non_kmer not in ("ignore", "token_ce"):
        raise ValueError(f"non_kmer must be 'ignore' or 'token_ce', got {non_kmer!r}")
    if not logits.dtype.is_floating_point:
        raise TypeError("logits must be a floating-point tensor")
    if logits.dim() < 1 or tuple(labels.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"labels shape {tuple(labels.shape)} must equal logits.shape[:-1] = {tuple(logits.shape[:-1])}"
        )
    if valid_len is not None and tuple(valid_len.shape) != tuple(labels.shape):
        raise ValueError(
            f"valid_len shape {tuple(valid_len.shape)} must equal labels shape {tuple(labels.shape)}"
        )
    n = 4**k
    vocab = logits.shape[-1]
    if kmer_start < 0 or kmer_start + n > vocab:
        raise ValueError(f"k-mer block [{kmer_start}, {kmer_start + n}) does not fit a vocabulary of {vocab}")
    if shift:
        if labels.dim() < 1 or labels.shape[-1] < 1:
            raise ValueError("shift=True needs a time dimension")
        logits = logits[..., :-1, :]
        labels = labels[..., 1:]
        valid_len = None if valid_len is None else valid_len[..., 1:]

    flat_logits = logits.reshape(-1, vocab)
    flat_labels = labels.reshape(-1).long().to(logits.device)
    ignored = flat_labels == ignore_index
    if len(ignore_ids):
        ignored |= torch.isin(flat_labels, torch.as_tensor(list(ignore_ids), device=flat_labels.device))
    is_kmer = ~ignored & (flat_labels >= kmer_start) & (flat_labels < kmer_start + n)
    is_ce = ~ignored & ~is_kmer
    if non_kmer == "ignore":
        is_ce = torch.zeros_like(is_ce)
    if is_ce.any() and (int(flat_labels[is_ce].min()) < 0 or int(flat_labels[is_ce].max()) >= vocab):
        raise ValueError(f"labels must be ids in [0, {vocab}) or ignore_index ({ignore_index})")

    targets = flat_labels[is_kmer] - kmer_start
    digits = kmer_digits(k, logits.device)[targets]  # (M, k)
    # every position a k-mer label (the usual DNA batch): a view, not an (M, V) copy and its scatter
    rows = flat_logits if bool(is_kmer.all()) else flat_logits[is_kmer]
    n_kmer = is_kmer.sum()
    n_ce = is_ce.sum()
    if reference_bug:
        return _reference(
            flat_logits, flat_labels, rows, digits, is_ce, kmer_start, k, non_kmer, n_kmer, n_ce
        )

    cdtype = compute_dtype(logits)
    x = rows.to(cdtype)
    lse = torch.logsumexp(x, dim=-1)  # full-vocabulary denominator
    log_num = _log_base_mass(x[:, kmer_start : kmer_start + n], k)  # k-mer rows only
    nll = lse[:, None] - log_num.gather(-1, digits[..., None]).squeeze(-1)  # (M, k)
    if valid_len is None:
        base_mask = torch.ones_like(nll, dtype=torch.bool)
    else:
        vl = valid_len.reshape(-1).to(logits.device).long()[is_kmer]
        if vl.numel() and int(vl.max()) > k:
            raise ValueError(f"valid_len must be <= k = {k} at k-mer labels")
        base_mask = torch.arange(k, device=logits.device) < vl[:, None]
    bp_sum = torch.where(base_mask, nll, 0.0).sum()
    n_bases = base_mask.sum()

    if n_ce.item() > 0:
        ce_sum = F.cross_entropy(flat_logits[is_ce].to(cdtype), flat_labels[is_ce], reduction="sum")
    else:
        ce_sum = flat_logits.sum().to(cdtype) * 0.0
    total = bp_sum + ce_sum  # ce_sum keeps a graph even when nothing is supervised
    return FnsLoss(
        loss=_safe_div(total, n_bases + n_ce),
        bp_loss=_safe_div(bp_sum, n_bases),
        token_loss=_safe_div(ce_sum, n_ce),
        n_bases=n_bases,
        n_kmer_tokens=n_kmer,
        n_ce_tokens=n_ce,
    )


def _reference(
    flat_logits: torch.Tensor,
    flat_labels: torch.Tensor,
    rows: torch.Tensor,
    digits: torch.Tensor,
    is_ce: torch.Tensor,
    kmer_start: int,
    k: int,
    non_kmer: str,
    n_kmer: torch.Tensor,
    n_ce: torch.Tensor,
) -> FnsLoss:
    """The public trainer's arithmetic, A-absorption and untouched tail included."""
    vocab = flat_logits.shape[-1]
    device = flat_logits.device
    zero = flat_logits.sum() * 0.0
    # vocabulary base table: k-mer rows hold their digits, every other row is all zeros ('A')
    table = torch.zeros(vocab, k, dtype=torch.long, device=device)
    table[kmer_start : kmer_start + 4**k] = kmer_digits(k, device)

    if n_kmer.item() > 0:
        probs = torch.softmax(rows, dim=-1)  # full vocabulary, logits dtype
        bp_loss = torch.zeros((), dtype=torch.float32, device=device)
        for j in range(k):
            marg = torch.zeros(rows.shape[0], 4, dtype=torch.float32, device=device)
            for b in range(4):
                marg[:, b] = probs[:, table[:, j] == b].sum(-1)
            logm = marg.clamp(min=1e-8).log()
            bp_loss = bp_loss + F.nll_loss(logm, digits[:, j], reduction="mean")
        bp_loss = bp_loss / k
    else:
        bp_loss = zero.float()

    if n_ce.item() > 0:
        token_loss = F.cross_entropy(flat_logits[is_ce], flat_labels[is_ce], reduction="mean") / k
    else:
        token_loss = zero

    if non_kmer == "ignore":
        loss = bp_loss
    elif n_kmer.item() + n_ce.item() == 0:
        loss = zero.float()
    else:
        loss = (bp_loss * n_kmer + token_loss * n_ce) / (n_kmer + n_ce)
    return FnsLoss(
        loss=loss,
        bp_loss=bp_loss,
        token_loss=token_loss,
        n_bases=n_kmer * k,
        n_kmer_tokens=n_kmer,
        n_ce_tokens=n_ce,
    )
