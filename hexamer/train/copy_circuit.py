"""A new model's first two layers set to copy from context: previous-token heads and induction heads.

Small transformers learn to copy (an induction head: find where the current tokens occurred
before, predict what followed them) only after a long plateau, and with 4,096 six-mer tokens that
plateau outlasts a small model's whole CPU training budget. :func:`plant_copy_circuit` writes the
circuit into a freshly initialised model instead, and training on a mix with repeats then keeps,
sharpens and calibrates it. Layout of the residual stream (the first :data:`RESERVED` dimensions):

* each base of a k-mer token as a ±1 pair (A, T, C, G = ++, +-, -+, --): ``CUR`` (12 dims at k=6);
* ``BIAS``: 1 on every token (what the positional heads attend with); ``SINK``: set on tokens that
  are not k-mers (``<dna>`` at position 0), where an induction head looks when nothing matches;
* layer 0, heads 0, 1 and 2 (rotary phases peaked one, two and three positions back) write the
  bases of the tokens 1, 2 and 3 back to ``PREV1``, ``PREV2``, ``PREV3``;
* layer 1, head 0 matches tokens (t, t-1) against (s-1, s-2) at every earlier position s, head 2
  matches (t-1, t-2) against (s-2, s-3) - 12 bases each at k=6, so a chance match in 1,024 tokens
  is rare - on the slowest rotary pairs (position-independent over the context); each writes the
  bases of token s to ``NEXT``, so a repeat of three tokens or more (both heads agree) writes them
  twice; an untied LM head scores every k-mer by how many of its bases agree.

Everything else keeps its random start. Needs an untied LM head (the current token's bases must not
score themselves), two key/value heads with two query heads each, and a ``head_dim`` with room for
25 slow rotary components.
"""

from __future__ import annotations

import math

import torch

from hexamer.fns import kmer_digits
from hexamer.model import LlamaModel

__all__ = ["RESERVED", "plant_copy_circuit"]

#: Residual dimensions the circuit owns (at k=6: CUR 0-11, BIAS 12, SINK 13, PREV1 16-27,
#: PREV2 32-43, PREV3 48-59, NEXT 64-75).
RESERVED = 80
_CUR, _BIAS, _SINK = 0, 12, 13
_PREV = (16, 32, 48)  # PREV1, PREV2, PREV3
_NEXT = 64
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
#: LM-head weight of one copied coordinate.
_HEAD_GAIN = 1.1


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


def _check(model: LlamaModel, k: int) -> None:
    cfg = model.config
    width = 2 * k
    if cfg.tie_word_embeddings or model.lm_head is None:
        raise ValueError("the copy circuit needs an untied LM head (tie_word_embeddings false)")
    if cfg.num_hidden_layers < 2:
        raise ValueError("the copy circuit needs at least 2 layers")
    if cfg.num_key_value_heads < 2 or cfg.num_attention_heads // cfg.num_key_value_heads < 2:
        raise ValueError("the copy circuit needs 2 key/value heads with 2 query heads each")
    if not 1 <= k <= 6:
        raise ValueError(f"the copy circuit holds k-mers of 1-6 bases, not {k}")
    if cfg.hidden_size < RESERVED + 64:
        raise ValueError(f"the copy circuit needs hidden_size >= {RESERVED + 64}")
    if cfg.head_dim < 2 * (2 * width + 1) or cfg.head_dim // 2 < _FAST_PAIRS:
        raise ValueError(f"the copy circuit needs head_dim >= {2 * (2 * width + 1)}")


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
        # layer 1's input adds PREV1-3 (3 * width); position 0 keeps its layer-0 norm
        amp1 = math.sqrt(hidden / (4 * width + 1 + free))
        sink_amp = math.sqrt(width) * amp0  # the sink coordinate at position 0 after layer 1's norm
        _induction_heads(model, hd, width, amp1, sink_amp)
        head[:, :RESERVED] = 0.0
        head[rows, _NEXT : _NEXT + width] = codes * _HEAD_GAIN
        for layer in model.layers:  # nothing else writes into the reserved dims at the start
            layer.self_attn.o_proj.weight[:RESERVED] = 0.0
            layer.mlp.down_proj.weight[:RESERVED] = 0.0
        _planted_outputs(model, hd, width)


def _positional_heads(model: LlamaModel, theta: torch.Tensor, amp: float, width: int) -> None:
    """Layer 0: heads 0 and 1 (key/value head 0) attend one and two positions back, head 2 (key/value
    head 1) three; their values are the attended token's bases."""
    attn = model.layers[0].self_attn
    hd, half, group = attn.head_dim, attn.head_dim // 2, attn.n_heads // attn.n_kv
    a = math.sqrt(_POS_GAIN)
    q, kw, v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight
    for back, head in ((1, 0), (2, 1), (3, group)):
        kv = head // group
        rq, rk = slice(head * hd, (head + 1) * hd), slice(kv * hd, (kv + 1) * hd)
        q[rq], kw[rk], v[rk] = 0.0, 0.0, 0.0
        for i in range(_FAST_PAIRS):
            t = float(theta[i])
            # key: a * e^{i theta}; query: a * e^{-i (back - 1) theta}, so the score peaks `back` back
            kw[kv * hd + i, _BIAS] = a * math.cos(t) / amp
            kw[kv * hd + i + half, _BIAS] = a * math.sin(t) / amp
            q[head * hd + i, _BIAS] = a * math.cos((back - 1) * t) / amp
            q[head * hd + i + half, _BIAS] = -a * math.sin((back - 1) * t) / amp
        for d in range(width):
            v[kv * hd + d, _CUR + d] = 1.0 / amp


def _induction_heads(model: LlamaModel, hd: int, width: int, amp: float, sink_amp: float) -> None:
    """Layer 1, head 0 (key/value head 0) matches (CUR, PREV1) against (PREV1, PREV2), head 2
    (key/value head 1) (PREV1, PREV2) against (PREV2, PREV3), on the slowest rotary components; the
    sink (position 0) scores just under a full match."""
    attn = model.layers[1].self_attn
    group = attn.n_heads // attn.n_kv
    a = math.sqrt(_MATCH_GAIN)
    comps = _slow_components(hd, 2 * width + 1)
    q, kw, v = attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight
    fields = (_CUR, *_PREV)
    for kv, shift in ((0, 0), (1, 1)):
        qo, ko = kv * group * hd, kv * hd
        q[qo : qo + hd], kw[ko : ko + hd], v[ko : ko + hd] = 0.0, 0.0, 0.0
        q[qo + comps[0], _BIAS] = a / amp
        kw[ko + comps[0], _SINK] = a * _SINK_UNITS / sink_amp
        for d in range(width):
            for j in range(2):  # token t-shift-j at the query against s-1-shift-j at the key
                c = comps[1 + j * width + d]
                q[qo + c, fields[shift + j] + d] = a / amp
                kw[ko + c, fields[shift + j + 1] + d] = a / amp
            v[ko + d, _CUR + d] = 1.0 / amp


def _planted_outputs(model: LlamaModel, hd: int, width: int) -> None:
    """Output projections: layer 0 heads 0, 1, 2 -> PREV1-3; layer 1 heads 0 and 2 -> NEXT."""
    attn0, attn1 = model.layers[0].self_attn, model.layers[1].self_attn
    group = attn0.n_heads // attn0.n_kv
    o0, o1 = attn0.o_proj.weight, attn1.o_proj.weight
    for head, field in ((0, _PREV[0]), (1, _PREV[1]), (group, _PREV[2])):
        o0[:, head * hd : (head + 1) * hd] = 0.0
        for d in range(width):
            o0[field + d, head * hd + d] = 1.0
    for head in (0, group):
        o1[:, head * hd : (head + 1) * hd] = 0.0
        for d in range(width):
            o1[_NEXT + d, head * hd + d] = 1.0
