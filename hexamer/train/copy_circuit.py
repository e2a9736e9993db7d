"""A new model's first two layers set to copy from context: previous-token heads and an induction head.

Small transformers learn to copy (an induction head: find where the current tokens occurred
before, predict what followed them) only after a long plateau, and with 4,096 six-mer tokens that
plateau outlasts a small model's whole CPU training budget. :func:`plant_copy_circuit` writes the
circuit into a freshly initialised model instead, and :class:`CircuitFreeze` keeps it as planted
while the rest of the model trains around it (and learns the gain of a copy in the final norm).
Layout of the residual stream (the first :data:`RESERVED` dimensions):

* each base of a k-mer token as a ±1 pair (A, T, C, G = ++, +-, -+, --): ``CUR`` (12 dims at k=6);
* ``BIAS``: 1 on every token (what the positional heads attend with); ``SINK``: set on tokens that
  are not k-mers (``<dna>`` at position 0), where the induction head looks when nothing matches;
* layer 0, heads 0 and 1 (rotary phases peaked one and two positions back) write the previous and
  the one-before-previous token's bases to ``PREV1`` and ``PREV2``;
* layer 1, head 0 matches (current, previous) token against (previous, one-before) at every earlier
  position - 12 bases at k=6, so a chance match in 1,024 tokens is rare - on the slowest rotary
  pairs (position-independent over the context), and writes the bases of the token that followed
  the match to ``NEXT``; an untied LM head scores every k-mer by how many of its bases agree.

Everything else keeps its random start. Needs an untied LM head (the current token's bases must not
score themselves) and a ``head_dim`` with room for 25 slow rotary components.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

from hexamer.fns import kmer_digits
from hexamer.model import LlamaModel

__all__ = ["RESERVED", "CircuitFreeze", "CircuitShape", "check_circuit_shape", "plant_copy_circuit"]

#: Residual dimensions the circuit owns (at k=6: CUR 0-11, BIAS 12, SINK 13, PREV1 16-27,
#: PREV2 32-43, NEXT 48-59).
RESERVED = 64
_BIAS, _SINK = 12, 13
_PREV1, _PREV2, _NEXT = 16, 32, 48
#: ±1 pair per base, in the digit order of :func:`hexamer.fns.tables.kmer_digits` (A, T, C, G).
_CODE = torch.tensor([[1.0, 1.0], [1.0, -1.0], [-1.0, 1.0], [-1.0, -1.0]])
#: Fast rotary pairs of the positional heads, and their squared amplitude: an attention-logit gap
#: of about 0.84 * 96 / 8 = 10 nats between the intended offset and any other.
_FAST_PAIRS, _POS_GAIN = 6, 96.0
#: Squared amplitude of a matching base-pair coordinate in the induction head: one unit of
#: agreement is 64 / 8 = 8 nats of attention logit.
_MATCH_GAIN = 64.0
#: The sink scores as 23 of 24 agreeing coordinates: a full match wins, a near match does not.
_SINK_UNITS = 23.0
#: LM-head weight of one copied coordinate (fixed; the final norm's weights on ``NEXT`` scale it
#: and train). High, because the trained gain only creeps up: started at 1.1 on the demo shape it
#: reached 1.1 x 1.4-1.7 by step 800 while the rest of the model outgrew it, and retrieval failed
#: until the gain was tripled by hand; started at 5.5, retrieval held through training.
_HEAD_GAIN = 5.5


def _codes(k: int) -> torch.Tensor:
    """(4**k, 2k) ±1 codes of every k-mer."""
    return _CODE[kmer_digits(k)].reshape(4**k, 2 * k)


def _slow_components(head_dim: int, n: int) -> list[int]:
    """The ``n`` head-dim indices of the slowest rotary pairs (both halves of each pair)."""
    half = head_dim // 2
    out: list[int] = []
    for pair in range(half - 1, -1, -1):
        out += [pair, pair + half]
    return out[:n]


class CircuitShape(Protocol):
    """What the check reads: a :class:`hexamer.model.ModelConfig` or a new model's shape."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int | None
    tie_word_embeddings: bool


def check_circuit_shape(shape: CircuitShape, k: int = 6) -> None:
    """Raise ValueError unless a model of this shape can hold the circuit (``head_dim`` None:
    hidden_size // heads); run before any data is read or weights are allocated."""
    width = 2 * k
    heads, kv_heads = shape.num_attention_heads, shape.num_key_value_heads
    head_dim = shape.head_dim if shape.head_dim is not None else shape.hidden_size // max(heads, 1)
    if shape.tie_word_embeddings:
        raise ValueError("the copy circuit needs an untied LM head (tie_word_embeddings false)")
    if shape.num_hidden_layers < 2:
        raise ValueError("the copy circuit needs at least 2 layers")
    if kv_heads < 1 or heads // kv_heads < 2:
        raise ValueError("the copy circuit needs 2 query heads per key/value head")
    if not 1 <= k <= 6:
        raise ValueError(f"the copy circuit holds k-mers of 1-6 bases, not {k}")
    if shape.hidden_size < RESERVED + 64:
        raise ValueError(f"the copy circuit needs hidden_size >= {RESERVED + 64}")
    if head_dim < 2 * (2 * width + 1):  # also room for the _FAST_PAIRS positional pairs
        raise ValueError(f"the copy circuit needs head_dim >= {2 * (2 * width + 1)}")


def _check(model: LlamaModel, k: int) -> None:
    if model.lm_head is None:
        raise ValueError("the copy circuit needs an untied LM head (tie_word_embeddings false)")
    check_circuit_shape(model.config, k)


def plant_copy_circuit(model: LlamaModel, kmer_start: int, k: int = 6) -> None:
    """Set ``model``'s embedding, layers 0-1 attention and LM head to copy from context (module doc).

    ``model`` must be freshly initialised (its other weights are kept); rows ``kmer_start ..
    kmer_start + 4**k`` of the vocabulary are the k-mers."""
    _check(model, k)
    cfg = model.config
    hidden, hd, width = cfg.hidden_size, cfg.head_dim, 2 * k
    n_kmers = 4**k
    rows = slice(kmer_start, kmer_start + n_kmers)
    codes = _codes(k)
    theta = 1.0 / cfg.rope.theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    emb, head = model.embed_tokens.weight, model.lm_head.weight  # type: ignore[union-attr]
    with torch.no_grad():
        # embedding: every token has the same squared norm (width + 1) in the reserved dims, so
        # RMSNorm scales all of them alike
        emb[:, :RESERVED] = 0.0
        emb[:, _BIAS] = 1.0
        emb[rows, :width] = codes
        is_kmer = torch.zeros(emb.shape[0], dtype=torch.bool)
        is_kmer[rows] = True
        emb[~is_kmer, _SINK] = math.sqrt(width)
        free = emb[:, RESERVED:].pow(2).sum(1).mean().item()
        amp0 = math.sqrt(hidden / (width + 1 + free))  # a reserved unit after layer 0's norm
        _positional_heads(model, theta, amp0, width)
        # layer 1's input adds PREV1 and PREV2 (2 * width); position 0 keeps its layer-0 norm
        amp1 = math.sqrt(hidden / (3 * width + 1 + free))
        sink_amp = math.sqrt(width) * amp0  # the sink coordinate at position 0 after layer 1's norm
        _induction_head(model, hd, width, amp1, sink_amp)
        head[:, :RESERVED] = 0.0
        head[rows, _NEXT : _NEXT + width] = codes * _HEAD_GAIN
        for layer in model.layers:  # nothing else writes into the reserved dims at the start
            layer.self_attn.o_proj.weight[:RESERVED] = 0.0
            layer.mlp.down_proj.weight[:RESERVED] = 0.0
        _planted_outputs(model, hd, width)


def _positional_heads(model: LlamaModel, theta: torch.Tensor, amp: float, width: int) -> None:
    """Layer 0, heads 0 and 1 (sharing key/value head 0): attend one and two positions back and
    copy that token's bases."""
    attn = model.layers[0].self_attn
    hd, half = attn.head_dim, attn.head_dim // 2
    a = math.sqrt(_POS_GAIN)
    q, kw, v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight
    q[: 2 * hd] = 0.0
    kw[:hd] = 0.0
    v[:hd] = 0.0
    for i in range(_FAST_PAIRS):
        t = float(theta[i])
        # key: a * e^{i theta}; query head 0: a (peak at offset 1), head 1: a * e^{-i theta} (offset 2)
        kw[i, _BIAS], kw[i + half, _BIAS] = a * math.cos(t) / amp, a * math.sin(t) / amp
        q[i, _BIAS] = a / amp
        q[hd + i, _BIAS], q[hd + i + half, _BIAS] = a * math.cos(t) / amp, -a * math.sin(t) / amp
    for d in range(width):
        v[d, d] = 1.0 / amp


def _induction_head(model: LlamaModel, hd: int, width: int, amp: float, sink_amp: float) -> None:
    """Layer 1, head 0 (key/value head 0): match (CUR, PREV1) against (PREV1, PREV2) on the slowest
    rotary components; the sink (position 0) scores just under a full match."""
    attn = model.layers[1].self_attn
    a = math.sqrt(_MATCH_GAIN)
    comps = _slow_components(hd, 2 * width + 1)
    q, kw, v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight
    q[:hd] = 0.0
    kw[:hd] = 0.0
    v[:hd] = 0.0
    q[comps[0], _BIAS] = a / amp
    kw[comps[0], _SINK] = a * _SINK_UNITS / sink_amp
    for d in range(width):
        q[comps[1 + d], d] = a / amp  # current token ...
        kw[comps[1 + d], _PREV1 + d] = a / amp  # ... against the token before the key position
        q[comps[1 + width + d], _PREV1 + d] = a / amp  # previous token ...
        kw[comps[1 + width + d], _PREV2 + d] = a / amp  # ... against the one before that
        v[d, d] = 1.0 / amp


def _planted_outputs(model: LlamaModel, hd: int, width: int) -> None:
    """Output projections: layer 0 heads 0/1 -> PREV1/PREV2, layer 1 head 0 -> NEXT."""
    o0 = model.layers[0].self_attn.o_proj.weight
    o1 = model.layers[1].self_attn.o_proj.weight
    o0[:, : 2 * hd] = 0.0
    o1[:, :hd] = 0.0
    for d in range(width):
        o0[_PREV1 + d, d] = 1.0
        o0[_PREV2 + d, hd + d] = 1.0
        o1[_NEXT + d, d] = 1.0


def _fixed_blocks(model: LlamaModel) -> list[tuple[torch.nn.Parameter, tuple[slice, ...]]]:
    """The weights that make the circuit, and every path into the reserved dimensions.

    Fixed: the reserved columns of the embedding and the LM head; the reserved rows of every
    attention output and MLP down projection (nothing else writes where the circuit reads or
    writes); layer 0 heads 0-1 and layer 1 head 0 whole (queries, their key/value head, output
    columns); the reserved part of layers 0-1's input norms. Everything else trains, the final
    norm included: its weights on ``NEXT`` are the learnt gain of a copy."""
    hd, every = model.config.head_dim, slice(None)
    res = slice(0, RESERVED)
    blocks: list[tuple[torch.nn.Parameter, tuple[slice, ...]]] = [
        (model.embed_tokens.weight, (every, res)),
        (model.lm_head.weight, (every, res)),  # type: ignore[union-attr]
    ]
    for layer in model.layers:
        blocks += [(layer.self_attn.o_proj.weight, (res, every)), (layer.mlp.down_proj.weight, (res, every))]
    for index, heads in ((0, 2), (1, 1)):
        layer = model.layers[index]
        attn = layer.self_attn
        blocks += [
            (attn.q_proj.weight, (slice(0, heads * hd), every)),
            (attn.k_proj.weight, (slice(0, hd), every)),
            (attn.v_proj.weight, (slice(0, hd), every)),
            (attn.o_proj.weight, (every, slice(0, heads * hd))),
            (layer.input_layernorm.weight, (res,)),
        ]
    return blocks


class CircuitFreeze:
    """Keeps a planted circuit as planted while the rest of the model trains.

    Left trainable, the circuit did not survive: its exact zeros and gains drift (AdamW steps every
    weight by up to about the learning rate, however small its gradient), and in the demo shape's
    run the induction head's match fell under its sink in some rows while later layers outweighed
    the copied bases in others (planted-value retrieval 7 of 10 rows at step 200, 1 of 20 at step
    1,200). Call :meth:`zero_grads` after the backward passes (before clipping) and :meth:`restore`
    after the optimizer step (weight decay would otherwise still shrink the fixed values)."""

    def __init__(self, model: LlamaModel) -> None:
        _check(model, 1)
        self.blocks = [(p, index, p.detach()[index].clone()) for p, index in _fixed_blocks(model)]

    def zero_grads(self) -> None:
        for p, index, _ in self.blocks:
            if p.grad is not None:
                p.grad[index] = 0.0

    def restore(self) -> None:
        with torch.no_grad():
            for p, index, value in self.blocks:
                p[index] = value

    def drift(self) -> float:
        """Largest absolute change of a fixed weight since the freeze began (0 when kept)."""
        with torch.no_grad():
            return max(float((p[index] - value).abs().max()) for p, index, value in self.blocks)
