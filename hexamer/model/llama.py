"""A compact Llama decoder (the Carbon architecture) with a contiguous KV cache.

One readable file: RMSNorm, SwiGLU MLP, grouped-query attention on
``torch.nn.functional.scaled_dot_product_attention``, rotary embeddings from :mod:`hexamer.model.rope`.
Module names mirror Hugging Face's (``embed_tokens``, ``layers.N.self_attn.q_proj``, ...) so weights
map one to one.

How to drive it (prefill + decode, what an engine does)::

    cache = KVCache.for_model(model, batch_size=B, max_len=L)
    out = model(prompt_ids, kv_cache=cache, attention_mask=prompt_mask, logits_at="last")
    for _ in range(n):
        next_ids = out.logits.argmax(-1, keepdim=True)             # (B, 1)
        out = model(next_ids, kv_cache=cache, logits_at="last")

Every forward appends its ``T`` tokens to each row of the cache at that row's own length, so rows
may be at different lengths (continuous batching); ``cache_rows`` runs a forward on a subset of
the cache's rows. ``attention_mask`` marks which of the *new* tokens are real: the cache remembers
it, so left (or right) padding written once stays masked for the rest of the generation.
Positions default to "number of real tokens before this one" in the row and may be given
explicitly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from hexamer.model.config import ModelConfig
from hexamer.model.kv_cache import AttentionPlan, KVCache, build_mask
from hexamer.model.rope import apply_rope, rope_cos_sin, rope_frequencies

__all__ = [
    "DECODE_KERNEL_MAX_TOKENS",
    "DecodeAttention",
    "LlamaModel",
    "ModelOutput",
    "VocabRows",
    "positions_from_mask",
]

#: Most new tokens per row a forward may have for :attr:`Attention.decode_kernel` to run it
#: (decode steps, speculative verification); longer ones (prefill chunks) use SDPA.
DECODE_KERNEL_MAX_TOKENS = 16


#: A kernel for one layer's attention in a decode-shaped forward, cache write included, called as
#: ``(q, k, v, cos, sin, k_cache, v_cache, slots, mask, *, rows, scale) -> (B, T, H * D)``:
#: :meth:`hexamer.model.native.NativeKernels.decode_attention` (argument meanings there).
DecodeAttention = Callable[..., torch.Tensor]

#: A fused RMSNorm ``(x, weight, eps) -> normed x``, e.g. :meth:`hexamer.model.native.NativeKernels.rms_norm`.
NormKernel = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]

#: ``(hidden, head_weight, rows) -> float32 logits of those rows, or None``: see :attr:`LlamaModel.head_kernel`.
HeadKernel = Callable[[torch.Tensor, torch.Tensor, slice], torch.Tensor | None]

#: ``(x, cos, sin, plan) -> x after every decoder layer, or None``: see :attr:`LlamaModel.layers_kernel`.
LayersKernel = Callable[..., torch.Tensor | None]

#: Rows of the LM head to score: a ``(start, stop)`` pair or ``slice`` (a view, no copy) or an index tensor.
VocabRows = torch.Tensor | tuple[int, int] | slice


# ---------------------------------------------------------------------------------------------
# building blocks


class RMSNorm(nn.Module):
    """Root-mean-square norm computed in float32 and cast back, as Llama checkpoints expect."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        #: One fused kernel for the same maths, set by the CPU fast path
        #: (:func:`hexamer.model.cpu.use_native_norms`); ``None`` = the PyTorch ops below.
        self.kernel: NormKernel | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel is not None and not torch.is_grad_enabled() and x.dtype == self.weight.dtype:
            return self.kernel(x, self.weight, self.eps)
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


class MLP(nn.Module):
    """SwiGLU feed-forward: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        h, f, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(h, f, bias=bias)
        self.up_proj = nn.Linear(h, f, bias=bias)
        self.down_proj = nn.Linear(f, h, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Attention(nn.Module):
    """Grouped-query self-attention with rotary embeddings; any ``head_dim``."""

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.n_heads = config.num_attention_heads
        self.n_kv = config.num_key_value_heads
        self.head_dim = config.head_dim
        h, bias = config.hidden_size, config.attention_bias
        self.q_proj = nn.Linear(h, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, h, bias=bias)
        #: A faster kernel for decode-shaped forwards over the cache, set by the CPU fast path
        #: (:func:`hexamer.model.cpu.use_native_attention`); ``None`` = SDPA always.
        self.decode_kernel: DecodeAttention | None = None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor:
        b, t, _ = x.shape
        if self._decode_kernel_applies(plan, t):
            return self._decode(x, cos, sin, plan)
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if plan.cache is not None:
            plan.cache.write(self.layer_idx, k, v, plan)
            k, v = plan.cache.read(self.layer_idx, k, v, plan)
        dtype = q.dtype
        if q.device.type == "cpu" and dtype != torch.float32:
            # PyTorch's CPU attention kernel is ~3x slower in bf16/fp16 than in fp32 at decode
            # shapes; attention is a small share of the FLOPs, so run it in fp32 (more accurate too).
            # Cached keys/values are already fp32 there (LlamaModel.kv_dtype): no per-step upcast.
            q, k, v = q.float(), k.float(), v.float()
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=plan.mask,
            is_causal=plan.mask is None and t > 1,
            scale=self.head_dim**-0.5,
            enable_gqa=self.n_kv != self.n_heads,
        ).to(dtype)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim))

    def _decode_kernel_applies(self, plan: AttentionPlan, t: int) -> bool:
        """A decode kernel is set and this is a decode-shaped forward over a (masked) cache."""
        has_cache = plan.cache is not None and plan.mask is not None
        return self.decode_kernel is not None and has_cache and t <= DECODE_KERNEL_MAX_TOKENS

    def _decode(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor:
        """The same attention through :attr:`decode_kernel` (rotation and cache write included)."""
        assert self.decode_kernel is not None and plan.cache is not None and plan.mask is not None
        assert plan.slots is not None
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim)
        cache = plan.cache
        out = self.decode_kernel(
            q, k, v, cos, sin, cache.k[self.layer_idx], cache.v[self.layer_idx], plan.slots, plan.mask,
            rows=plan.rows, scale=self.head_dim**-0.5, block_table=cache.table_dev,
        )  # fmt: skip
        return self.o_proj(out)


class DecoderLayer(nn.Module):
    """Pre-norm transformer block: ``x + attn(norm(x))`` then ``x + mlp(norm(x))``."""

    def __init__(self, config: ModelConfig, layer_idx: int) -> None:
        super().__init__()
        self.self_attn = Attention(config, layer_idx)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, plan)
        return x + self.mlp(self.post_attention_layernorm(x))


# ---------------------------------------------------------------------------------------------
# KV cache


def positions_from_mask(attention_mask: torch.Tensor, start: torch.Tensor | int = 0) -> torch.Tensor:
    """Position ids ``(B, T)`` that count only real tokens, so left padding does not shift RoPE.

    ``start`` (per row or scalar) is the number of real tokens already processed (the cache's
    :meth:`KVCache.num_real_tokens`). Padding positions get the next real token's id (clamped at
    ``start``); their value is irrelevant because they are masked out.
    """
    mask = attention_mask.to(torch.int64)
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    if isinstance(start, torch.Tensor):
        start = start.to(pos.device)[:, None]
    return pos + start


# ---------------------------------------------------------------------------------------------
# model


@dataclass
class ModelOutput:
    """What a forward returns; fields not asked for are ``None``.

    ``logits`` are float32: ``(B, T, V')`` for ``logits_at="all"``, ``(B, V')`` for "last" or an index
    tensor, where ``V'`` is the vocabulary or the requested row subset. ``hidden`` is the final
    normed hidden state ``(B, T, H)``. ``layer_hidden`` follows Hugging Face's ``hidden_states``:
    ``num_layers + 1`` tensors, the input of each layer (index 0 = embeddings) and, last, the
    final normed state.
    """

    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    layer_hidden: tuple[torch.Tensor, ...] | None = None


class LlamaModel(nn.Module):
    """Llama causal LM (``LlamaForCausalLM`` weights) with tied or untied LM head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head: nn.Linear | None = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )
        # Plain attribute, not a buffer: `.to(bfloat16)` must never round the frequencies.
        self._inv_freq, self.rope_scale = rope_frequencies(config.rope, config.head_dim)
        self._inv_freq_cache: dict[torch.device, torch.Tensor] = {}
        #: Scores a contiguous block of LM-head rows faster, set by the CPU fast path
        #: (:class:`hexamer.model.cpu.PanelHead`); returns ``None`` for what it does not take.
        self.head_kernel: HeadKernel | None = None
        #: Runs every decoder layer of a forward at once where it can, set by the CPU fast path
        #: (:class:`hexamer.model.decode_step.Int4DecodeStep`); returns ``None`` for what it does
        #: not take, and the layers then run one module at a time.
        self.layers_kernel: LayersKernel | None = None

    @property
    def dtype(self) -> torch.dtype:
        """Weight (and activation) dtype."""
        return self.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        """Device the weights live on."""
        return self.embed_tokens.weight.device

    @property
    def kv_dtype(self) -> torch.dtype:
        """Default dtype of this model's KV cache: the weights' dtype, except float32 for 16-bit
        weights on CPU. CPU attention runs in float32 (see :class:`Attention`); a float32 cache is
        read as is instead of being upcast, all of it, by every layer at every decode step (500M
        shape, bf16, batch 16, 1,080 bp in / 540 out: 18.9 -> 15.6 s). A cache in the weights' own
        dtype is accepted too (the engine keeps a one-row cache in bf16: there the upcast is cheap
        and the smaller cache wins, 5.5 -> 5.2 s at batch 1)."""
        if self.device.type == "cpu" and self.dtype in (torch.bfloat16, torch.float16):
            return torch.float32
        return self.dtype

    @property
    def head_weight(self) -> torch.Tensor:
        """LM head matrix ``(vocab, hidden)``: the embedding matrix when embeddings are tied."""
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def _inv_freq_on(self, device: torch.device) -> torch.Tensor:
        cached = self._inv_freq_cache.get(device)
        if cached is None:
            cached = self._inv_freq_cache[device] = self._inv_freq.to(device)
        return cached

    def compute_logits(
        self,
        hidden: torch.Tensor,
        vocab_rows: VocabRows | None = None,
        *,
        fp32: bool = False,
    ) -> torch.Tensor:
        """Float32 logits of normed hidden states ``(..., H)`` for all or some vocabulary rows.

        ``vocab_rows`` restricts the LM head (e.g. the DNA block plus ``</dna>``) so decoding only
        pays for the rows it samples from; a ``(start, stop)`` range is a free view, an index
        tensor gathers rows. By default the matmul runs in the weight dtype (as the reference) and
        is upcast; ``fp32=True`` multiplies in float32 (costs an fp32 copy of the selected rows).
        """
        weight = self.head_weight
        if isinstance(vocab_rows, torch.Tensor):
            weight = weight.index_select(0, vocab_rows.to(device=weight.device, dtype=torch.int64))
        elif vocab_rows is not None:
            sl = vocab_rows if isinstance(vocab_rows, slice) else slice(*vocab_rows)
            if self.head_kernel is not None and not fp32:
                logits = self.head_kernel(hidden, weight, sl)
                if logits is not None:
                    return logits
            weight = weight[sl]
        if fp32:
            return F.linear(hidden.to(torch.float32), weight.to(torch.float32))
        return F.linear(hidden, weight).to(torch.float32)

    def decode_static(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        live: torch.Tensor,
        kv_cache: KVCache,
        vocab_rows: tuple[int, int] | None = None,
    ) -> torch.Tensor:
        """One new token for every cache row, with shapes that never change between steps.

        Attention reads all ``max_len`` slots through the validity mask instead of slicing to the
        longest row, so the whole step is one fixed graph per batch size: ``torch.compile`` captures
        it once (and on CUDA, ``mode="reduce-overhead"`` replays it as a CUDA graph). The caller
        owns the CPU bookkeeping: ``slots`` (B,) is each row's next free slot, ``positions`` (B, 1)
        its RoPE position, ``live`` (B,) marks rows holding a request; it then advances
        ``kv_cache.lengths``. Returns float32 logits ``(B, V')`` of the requested rows.
        """
        plan = kv_cache.plan_static(slots, live)
        x = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(self._inv_freq_on(x.device), positions, self.rope_scale, x.dtype)
        x = self._run_layers(x, cos, sin, plan)
        return self.compute_logits(self.norm(x[:, -1]), vocab_rows)

    def _run_layers(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor:
        """Every decoder layer: through :attr:`layers_kernel` where it takes the forward, else one
        layer at a time."""
        if self.layers_kernel is not None:
            out = self.layers_kernel(x, cos, sin, plan)
            if out is not None:
                return out
        for layer in self.layers:
            x = layer(x, cos, sin, plan)
        return x

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor | None = None,
        kv_cache: KVCache | None = None,
        attention_mask: torch.Tensor | None = None,
        *,
        cache_rows: Sequence[int] | torch.Tensor | None = None,
        logits_at: Literal["all", "last", "none"] | torch.Tensor = "all",
        vocab_rows: VocabRows | None = None,
        fp32_logits: bool = False,
        return_hidden: bool = False,
        return_layer_hidden: bool = False,
    ) -> ModelOutput:
        """Run ``T`` new tokens per row, optionally appending them to ``kv_cache``.

        Args:
            input_ids: ``(B, T)`` token ids.
            positions: ``(B, T)`` or ``(T,)`` RoPE position ids; default: count of real tokens
                before each one in its row (cache included), see :func:`positions_from_mask`.
            kv_cache: cache to append to and attend over; ``None`` runs a self-contained pass.
            attention_mask: ``(B, T)`` 1/True for real tokens, 0/False for padding among the
                *new* tokens (any side). The cache keeps it for later steps.
            cache_rows: which cache rows the ``B`` input rows are (default: all, in order).
            logits_at: "all" positions, "last" position, "none", or a ``(B,)`` index tensor of one
                position per row (e.g. the last real token of right-padded rows).
            vocab_rows: restrict logits to some LM-head rows (see :meth:`compute_logits`).
            fp32_logits: do the LM-head matmul in float32.
            return_hidden: also return the final normed hidden states ``(B, T, H)``.
            return_layer_hidden: also return every layer's input plus the final normed state.
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
        b, t = input_ids.shape
        device = input_ids.device
        per_row = isinstance(logits_at, torch.Tensor)
        if per_row:
            if logits_at.shape != (b,):
                raise ValueError(
                    f"a logits_at tensor must hold one index per row {(b,)}, got {tuple(logits_at.shape)}"
                )
        elif logits_at not in ("all", "last", "none"):
            raise ValueError(f"logits_at must be 'all', 'last', 'none' or an index tensor, got {logits_at!r}")
        if attention_mask is not None:
            if attention_mask.shape != (b, t):
                raise ValueError(
                    f"attention_mask must match input_ids {(b, t)} (new tokens only), got {tuple(attention_mask.shape)}"
                )
            new_valid = attention_mask.to(device=device, dtype=torch.bool)
        else:
            new_valid = None

        if positions is None:
            start: torch.Tensor | int = 0
            if kv_cache is not None:
                _, rows_dev = kv_cache.row_index(cache_rows, b)
                start = kv_cache.num_real_tokens(rows_dev).to(device)
            ones = torch.ones(b, t, dtype=torch.bool, device=device)
            positions = positions_from_mask(ones if new_valid is None else new_valid, start)
        elif positions.dim() == 1:
            positions = positions.to(device).expand(b, t)
        elif positions.shape != (b, t):
            raise ValueError(
                f"positions must be (batch, tokens) {(b, t)} or (tokens,), got {tuple(positions.shape)}"
            )

        if kv_cache is not None:
            if kv_cache.k and kv_cache.k[0].dtype not in (self.kv_dtype, self.dtype):
                raise ValueError(
                    f"KV cache dtype {kv_cache.k[0].dtype} is neither the model's {self.dtype} "
                    f"nor its KV dtype {self.kv_dtype}"
                )
            plan = kv_cache.plan_forward(cache_rows, b, t, new_valid)
        elif new_valid is not None:
            slots = torch.arange(t, device=device).expand(b, t)
            plan = AttentionPlan(mask=build_mask(slots, new_valid))
        else:
            plan = AttentionPlan(mask=None)

        x = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(self._inv_freq_on(x.device), positions.to(x.device), self.rope_scale, x.dtype)
        layer_hidden: list[torch.Tensor] | None = [] if return_layer_hidden else None
        if layer_hidden is None:
            x = self._run_layers(x, cos, sin, plan)
        else:
            for layer in self.layers:
                layer_hidden.append(x)
                x = layer(x, cos, sin, plan)

        # RMSNorm is per position: when only some positions are scored, normalise just those.
        mode = "rows" if per_row else logits_at
        need_all = return_hidden or return_layer_hidden or mode == "all"
        hidden = self.norm(x) if need_all else None
        if layer_hidden is not None and hidden is not None:
            layer_hidden.append(hidden)

        logits = None
        if mode == "all":
            assert hidden is not None
            logits = self.compute_logits(hidden, vocab_rows, fp32=fp32_logits)
        elif mode != "none":
            if isinstance(logits_at, torch.Tensor):
                index = (torch.arange(b, device=x.device), logits_at.to(x.device))
            else:
                index = (slice(None), -1)
            picked = hidden[index] if hidden is not None else self.norm(x[index])
            logits = self.compute_logits(picked, vocab_rows, fp32=fp32_logits)
        return ModelOutput(
            logits=logits,
            hidden=hidden if return_hidden else None,
            layer_hidden=tuple(layer_hidden) if layer_hidden is not None else None,
        )
