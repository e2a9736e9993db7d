"""Packed forwards of a parent sequence's edited copies from their edited token on.

An edited copy whose first change is input position ``p`` has the parent's keys and values at
every position before ``p``; from ``p`` on it runs its own tokens (its *tail*). Tails of any
lengths and edit positions run together, packed with no padding: every matrix product of the
decoder (projections, MLP) runs once over all the packed tokens of a forward, and only attention
is per group of tails that share ``p`` (their queries attend to the parent's first ``p`` keys,
then causally to their own). Nothing is copied per tail from the parent but its prefix keys, read
in place. The same decoder modules (norms, projections, MLP, RoPE tables) run as in
:meth:`~hexamer.model.LlamaModel.forward`, so the hidden states equal a forward of the whole edited
sequence up to float32 rounding (the tests compare candidate by candidate).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hexamer.model import LlamaModel, rope_cos_sin, rope_frequencies

__all__ = ["Group", "TailRunner"]


@dataclass(frozen=True)
class Group:
    """``len(first)`` tails of one start: input position ``start`` holds ``first[i]`` (token ids),
    the positions after it the parent's inputs."""

    start: int
    first: torch.Tensor  # (n,) int64 token ids at ``start``


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` ``(N, heads, d)`` rotated by per-token tables ``(N, d)`` (half-split pairing, as
    :func:`hexamer.model.apply_rope`)."""
    cos, sin = cos[:, None], sin[:, None]
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class TailRunner:
    """One parent's forward (``inputs``: its ``T`` input ids, ``<dna>`` first) and the packed
    forwards of tails forked from it. :meth:`parent` runs first; :meth:`tails` then returns the
    normed hidden states of every tail position, group after group, row after row."""

    def __init__(self, model: LlamaModel, inputs: torch.Tensor) -> None:
        self.model = model
        cfg = model.config
        self.n_heads, self.n_kv, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        self.inputs = inputs.to(model.device)
        t_all = len(inputs)
        inv_freq, scale = rope_frequencies(cfg.rope, cfg.head_dim)
        pos = torch.arange(t_all, device=model.device)
        self.cos, self.sin = rope_cos_sin(inv_freq.to(model.device), pos, scale, model.dtype)
        self.keys: list[torch.Tensor] = []  # per layer (n_kv, T, d): the parent's, rotated
        self.values: list[torch.Tensor] = []
        self._q0 = torch.empty(0)  # layer 0's rotated queries of the parent (heads, T, d)
        self._masks: dict[tuple[int, int], torch.Tensor] = {}  # this forward's, shared by its layers

    def _mask(self, start: int, width: int) -> torch.Tensor:
        """``(width, start + width)`` True = may attend: every prefix key, own keys causally."""
        key = (start, width)
        if key not in self._masks:
            own = torch.ones(width, width, dtype=torch.bool, device=self.model.device).tril()
            prefix = torch.ones(width, start, dtype=torch.bool, device=self.model.device)
            self._masks[key] = torch.cat([prefix, own], dim=1)
        return self._masks[key]

    @torch.inference_mode()
    def parent(self) -> torch.Tensor:
        """``(T, H)`` normed hidden states of the parent (position ``t`` predicts token ``t``);
        keeps its keys and values for the tails."""
        self.keys, self.values = [], []
        layout = [(0, 1, len(self.inputs))]
        x = self.model.embed_tokens(self.inputs)
        return self._layers(x, layout, self.cos, self.sin, record=True)

    @torch.inference_mode()
    def tails(self, groups: list[Group]) -> torch.Tensor:
        """``(sum n·w, H)`` normed hidden states of the groups' tails in one packed forward
        (``w = T - start`` positions per tail, predicting tokens ``start .. T-1``)."""
        t_all, dev = len(self.inputs), self.model.device
        self._masks.clear()  # kept for one forward only: masks of long tails are large
        pos, firsts, widths = [], [], []
        layout = []
        for g in groups:
            n, w = len(g.first), t_all - g.start
            pos.append(torch.arange(g.start, t_all, device=dev).repeat(n))
            firsts.append(g.first.to(dev))
            widths += [w] * n
            layout.append((g.start, n, w))
        at = torch.cat(pos)
        width = torch.tensor(widths, device=dev)
        head = torch.cumsum(width, 0) - width  # each tail's first token (its edited one), packed
        ids = self.inputs[at]
        ids[head] = torch.cat(firsts)
        x = self.model.embed_tokens(ids)
        return self._layers(x, layout, self.cos[at], self.sin[at], record=False, reuse=(at, head))

    def _layers(
        self,
        x: torch.Tensor,
        layout: list[tuple[int, int, int]],
        cos: torch.Tensor,
        sin: torch.Tensor,
        *,
        record: bool,
        reuse: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The decoder layers over packed tokens ``x`` ``(N, H)``. ``record``: keep the keys and
        values (and layer 0's queries) as the parent's. ``reuse`` = (input position of each token,
        indices of the tails' first tokens): every other token's layer-0 input is the parent's at
        its position, so are its layer-0 query, key and value, taken from the parent's."""
        n_tok = x.shape[0]
        nh, nkv, d = self.n_heads, self.n_kv, self.head_dim
        for i, layer in enumerate(self.model.layers):
            attn = layer.self_attn
            if i == 0 and reuse is not None:
                q, k, v = self._layer0_qkv(layer, x, cos, sin, *reuse)
            else:
                h = layer.input_layernorm(x)
                q = _rope(attn.q_proj(h).view(n_tok, nh, d), cos, sin).transpose(0, 1)  # (nh, N, d)
                k = _rope(attn.k_proj(h).view(n_tok, nkv, d), cos, sin).transpose(0, 1)
                v = attn.v_proj(h).view(n_tok, nkv, d).transpose(0, 1)
            if record:
                self.keys.append(k.contiguous())
                self.values.append(v.contiguous())
                if i == 0:
                    self._q0 = q.contiguous()
            out = torch.empty(n_tok, nh * d, dtype=x.dtype, device=x.device)
            off = 0
            for start, n, w in layout:
                cut = slice(off, off + n * w)
                out[cut] = self._attend(i, q[:, cut], k[:, cut], v[:, cut], start, n, w).reshape(
                    n * w, nh * d
                )
                off += n * w
            x = x + attn.o_proj(out)
            mlp = layer.mlp
            h = layer.post_attention_layernorm(x)
            gate = F.silu(mlp.gate_proj(h), inplace=True)
            gate *= mlp.up_proj(h)
            x += mlp.down_proj(gate)
        return self.model.norm(x)

    def _layer0_qkv(
        self, layer: torch.nn.Module, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
        at: torch.Tensor, head: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
        """Layer 0's rotated ``(heads, N, d)`` queries, keys, values of packed tail tokens: the
        parent's at their positions, computed only for the tails' first tokens (``head``)."""
        nh, nkv, d = self.n_heads, self.n_kv, self.head_dim
        attn = layer.self_attn
        h = layer.input_layernorm(x[head])
        m = len(head)
        q = self._q0.index_select(1, at)
        k = self.keys[0].index_select(1, at)
        v = self.values[0].index_select(1, at)
        q[:, head] = _rope(attn.q_proj(h).view(m, nh, d), cos[head], sin[head]).transpose(0, 1)
        k[:, head] = _rope(attn.k_proj(h).view(m, nkv, d), cos[head], sin[head]).transpose(0, 1)
        v[:, head] = attn.v_proj(h).view(m, nkv, d).transpose(0, 1)
        return q, k, v

    def _attend(
        self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int, n: int, w: int
    ) -> torch.Tensor:
        """``(n, w, nh, d)`` attention output of ``n`` tails of width ``w`` from ``start`` (``q``,
        ``k``, ``v``: their packed ``(heads, n·w, d)`` slices)."""
        nh, nkv, d = self.n_heads, self.n_kv, self.head_dim
        qg = q.reshape(nh, n, w, d).transpose(0, 1)
        kg = k.reshape(nkv, n, w, d).transpose(0, 1)
        vg = v.reshape(nkv, n, w, d).transpose(0, 1)
        mask = None
        if start:
            kp = self.keys[layer][:, :start].expand(n, nkv, start, d)
            vp = self.values[layer][:, :start].expand(n, nkv, start, d)
            kg, vg = torch.cat([kp, kg], dim=2), torch.cat([vp, vg], dim=2)
            mask = self._mask(start, w)
        dtype = qg.dtype
        if qg.device.type == "cpu" and dtype != torch.float32:  # as the decoder: fp32 attention on CPU
            qg, kg, vg = qg.float(), kg.float(), vg.float()
        out = F.scaled_dot_product_attention(
            qg,
            kg,
            vg,
            attn_mask=mask,
            is_causal=mask is None and w > 1,
            scale=d**-0.5,
            enable_gqa=nkv != nh,
        ).to(dtype)
        return out.transpose(1, 2)
