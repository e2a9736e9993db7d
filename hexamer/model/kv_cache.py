"""The KV cache: preallocated per-layer key/value tensors with per-row lengths and validity.

Everything that touches cache internals lives here: the attention bookkeeping a forward needs
(:class:`AttentionPlan`), and the row operations the engine and pipelines need between forwards
(:meth:`KVCache.fork`, :meth:`KVCache.truncate`, :meth:`KVCache.broadcast`), so no other module
edits ``k``/``v``/``valid``/``lengths`` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from hexamer.model.config import ModelConfig

__all__ = ["AttentionPlan", "CacheShape", "KVCache", "build_mask"]


class CacheShape(Protocol):
    """What :meth:`KVCache.for_model` reads of a model (the decoder satisfies it; the cache does
    not import the decoder, which imports the cache)."""

    @property
    def config(self) -> ModelConfig: ...

    @property
    def kv_dtype(self) -> torch.dtype: ...

    @property
    def device(self) -> torch.device: ...


@dataclass
class AttentionPlan:
    """Per-forward attention bookkeeping shared by all layers (mask, cache slots)."""

    mask: torch.Tensor | None  # (B, 1, T, S) bool, True = may attend; None = plain causal
    cache: KVCache | None = None
    rows: torch.Tensor | None = None  # cache rows (device), None = all rows in order
    slots: torch.Tensor | None = None  # (B, T) cache slot of each new token
    kv_len: int = 0  # cache slots the attention reads (max over rows)
    new_only: bool = False  # fresh rows, no padding: attend over the new keys alone (causal)


class KVCache:
    """Preallocated contiguous key/value cache: per layer ``(B, n_kv, max_len, head_dim)`` tensors.

    Each row has its own length (``lengths``, kept on the CPU so that no device sync is needed to
    slice) and a ``valid`` mask ``(B, max_len)`` remembering which slots hold real tokens, so padded
    prompts and rows at different lengths share one cache. Storage is zero-initialised: masked
    slots must hold finite numbers or they would poison attention with NaN.
    """

    def __init__(
        self,
        num_layers: int,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        max_len: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.valid = torch.zeros(batch_size, max_len, dtype=torch.bool, device=device)
        self.lengths = torch.zeros(batch_size, dtype=torch.int64)  # CPU on purpose
        self.batch_size = batch_size
        self.max_len = max_len

    @classmethod
    def for_model(
        cls,
        model: CacheShape,
        batch_size: int,
        max_len: int,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> KVCache:
        """A cache shaped for ``model`` (dtype and device default to the model's own)."""
        c = model.config
        return cls(
            c.num_hidden_layers,
            batch_size,
            c.num_key_value_heads,
            c.head_dim,
            max_len,
            dtype=dtype or model.kv_dtype,
            device=device or model.device,
        )

    @property
    def device(self) -> torch.device:
        """Device the cache tensors live on."""
        return self.valid.device

    def reset(self, rows: Sequence[int] | torch.Tensor | None = None) -> None:
        """Empty some rows (or all) so a finished sequence's slot can take a new request."""
        if rows is None:
            self.lengths.zero_()
            self.valid.zero_()
            return
        idx = torch.as_tensor(rows, dtype=torch.int64).cpu()
        self.lengths[idx] = 0
        self.valid[idx.to(self.device)] = False

    def fork(self, src: Sequence[int] | torch.Tensor, max_len: int | None = None) -> KVCache:
        """A new cache of ``len(src)`` rows whose row i starts as a copy of this cache's row
        ``src[i]`` (a shared prefix computed once, continued differently per row). ``max_len``
        (default: this cache's) must hold the copied slots."""
        idx = torch.as_tensor(src, dtype=torch.int64).cpu().reshape(-1)
        n = self.max_len
        max_len = n if max_len is None else max_len
        if max_len < n:
            raise ValueError(f"fork max_len {max_len} is shorter than the cache's {n} slots")
        k0 = self.k[0]
        out = KVCache(
            len(self.k), len(idx), k0.shape[1], k0.shape[3], max_len, dtype=k0.dtype, device=self.device
        )
        dev = idx.to(self.device)
        for layer in range(len(self.k)):
            out.k[layer][:, :, :n].copy_(self.k[layer].index_select(0, dev))
            out.v[layer][:, :, :n].copy_(self.v[layer].index_select(0, dev))
        out.valid[:, :n].copy_(self.valid.index_select(0, dev))
        out.lengths.copy_(self.lengths.index_select(0, idx))
        return out

    def truncate(self, rows: Sequence[int], lengths: Sequence[int]) -> None:
        """Roll ``rows`` back to ``lengths`` slots (e.g. rejected draft tokens): later slots become
        invalid and the next forward overwrites them."""
        if len(rows) != len(lengths):
            raise ValueError(f"truncate: {len(rows)} rows but {len(lengths)} lengths")
        if not len(rows):
            return
        idx = torch.as_tensor(rows, dtype=torch.int64).cpu()
        new = torch.as_tensor(lengths, dtype=torch.int64).cpu()
        if bool((new < 0).any()) or bool((new > self.lengths[idx]).any()):
            raise ValueError(f"truncate: lengths {new.tolist()} outside [0, current length]")
        self.lengths[idx] = new
        keep = torch.arange(self.max_len)[None, :] < new[:, None]
        dev = idx.to(self.device)
        self.valid[dev] = self.valid[dev] & keep.to(self.device)

    def broadcast(self, src: int = 0) -> None:
        """Copy row ``src`` into every row (one prompt prefilled once, continued by many rows)."""
        if not 0 <= src < self.batch_size:
            raise ValueError(f"broadcast: row {src} outside [0, {self.batch_size})")
        for layer in range(len(self.k)):
            self.k[layer][:] = self.k[layer][src : src + 1]
            self.v[layer][:] = self.v[layer][src : src + 1]
        self.valid[:] = self.valid[src : src + 1]
        self.lengths[:] = self.lengths[src]

    def num_real_tokens(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Real (non-padding) tokens stored per row, on the cache device: the next position id."""
        valid = self.valid if rows is None else self.valid.index_select(0, rows)
        return valid.sum(1)

    def row_index(
        self, rows: Sequence[int] | torch.Tensor | None, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """CPU row indices and their device copy (None when the forward covers every row in order)."""
        if rows is None:
            if batch != self.batch_size:
                raise ValueError(
                    f"input batch {batch} != cache batch {self.batch_size}; pass cache_rows to run a subset"
                )
            return torch.arange(self.batch_size), None
        cpu = torch.as_tensor(rows, dtype=torch.int64).cpu().reshape(-1)
        if cpu.numel() != batch:
            raise ValueError(f"cache_rows has {cpu.numel()} entries for an input batch of {batch}")
        if cpu.numel() and (int(cpu.min()) < 0 or int(cpu.max()) >= self.batch_size):
            raise ValueError(f"cache_rows must lie in [0, {self.batch_size}), got {cpu.tolist()}")
        if cpu.unique().numel() != cpu.numel():
            raise ValueError(f"cache_rows must not repeat a row, got {cpu.tolist()}")
        return cpu, cpu.to(self.device)

    def plan_forward(
        self, rows: Sequence[int] | torch.Tensor | None, batch: int, t: int, new_valid: torch.Tensor | None
    ) -> AttentionPlan:
        """Reserve slots for ``t`` new tokens per row, record their validity and build the mask.

        ``new_valid=None`` means every new token is real. When, in addition, every row starts
        empty (a fresh prefill), attention needs only the new keys with a plain causal mask, so no
        ``(B, 1, T, S)`` mask is materialised and SDPA can take its fastest (flash) path.
        """
        rows_cpu, rows_dev = self.row_index(rows, batch)
        start = self.lengths[rows_cpu]
        end = int(start.max()) + t if batch else t
        if end > self.max_len:
            worst = int(rows_cpu[int(start.argmax())])
            raise ValueError(
                f"KV cache full: row {worst} holds {int(start.max())} tokens, adding {t} exceeds max_len={self.max_len}"
            )
        device = self.device
        slots = start.to(device)[:, None] + torch.arange(t, device=device)  # (B, T)
        row_idx = torch.arange(batch, device=device) if rows_dev is None else rows_dev
        self.valid[row_idx[:, None], slots] = True if new_valid is None else new_valid.to(device)
        self.lengths[rows_cpu] = start + t

        if new_valid is None and end == t:
            return AttentionPlan(mask=None, cache=self, rows=rows_dev, slots=slots, kv_len=end, new_only=True)
        valid = self.valid[:, :end] if rows_dev is None else self.valid[:, :end].index_select(0, rows_dev)
        mask = build_mask(slots, valid)
        return AttentionPlan(mask=mask, cache=self, rows=rows_dev, slots=slots, kv_len=end)

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan) -> None:
        """Write this forward's keys/values ``(B, n_kv, T, head_dim)`` into their slots."""
        assert plan.slots is not None
        kc, vc = self.k[layer], self.v[layer]
        batch = k.shape[0]
        row_idx = torch.arange(batch, device=kc.device) if plan.rows is None else plan.rows
        kc[row_idx[:, None], :, plan.slots] = k.transpose(1, 2).to(kc.dtype)
        vc[row_idx[:, None], :, plan.slots] = v.transpose(1, 2).to(vc.dtype)

    def read(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys/values attention must read after :meth:`write` (``k``/``v``: the new ones)."""
        kc, vc = self.k[layer], self.v[layer]
        if plan.new_only:
            return k, v
        if plan.rows is None:
            return kc[:, :, : plan.kv_len], vc[:, :, : plan.kv_len]
        return (
            kc[:, :, : plan.kv_len].index_select(0, plan.rows),
            vc[:, :, : plan.kv_len].index_select(0, plan.rows),
        )


def build_mask(slots: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``(B, 1, T, S)`` boolean mask: causal in slot order, real keys only, and always the query itself.

    Letting a padding query see itself keeps its softmax finite on every SDPA kernel (some return
    NaN for fully masked rows); that NaN would flow into later layers' keys/values and through
    ``0 * NaN`` into real rows.
    """
    key = torch.arange(valid.shape[1], device=valid.device)
    q = slots[..., None]  # (B, T, 1)
    allowed = ((key <= q) & valid[:, None, :]) | (key == q)
    return allowed[:, None]
