"""The KV cache: preallocated per-layer key/value tensors with per-row lengths and validity.

Everything that touches cache internals lives here: the attention bookkeeping a forward needs
(:class:`AttentionPlan`), and the row operations the engine and pipelines need between forwards
(:meth:`KVCache.fork`, :meth:`KVCache.truncate`, :meth:`KVCache.broadcast`), so no other module
edits ``k``/``v``/``valid``/``lengths`` directly.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from hexamer.model.config import ModelConfig
from hexamer.model.kv_blocks import BLOCK_SIZE, NULL_BLOCK, BlockPool, OutOfBlocks, blocks_for
from hexamer.model.kv_prefix import PrefixIndex

__all__ = ["AttentionPlan", "CacheShape", "KVCache", "build_mask", "gather_blocks"]


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
    slots: torch.Tensor | None = None  # (B, T) cache slot of each new token (position in its row)
    kv_len: int = 0  # cache slots the attention reads (max over rows)
    new_only: bool = False  # fresh rows, no padding: attend over the new keys alone (causal)
    blocks: torch.Tensor | None = None  # (B, T) pool block of each new token
    offsets: torch.Tensor | None = None  # (B, T) its slot inside that block


class KVCache:
    """Paged key/value cache: per layer one pool of fixed-size blocks ``(n_kv, num_blocks,
    block_size, head_dim)``, and per row a block table mapping its slots to blocks.

    A row is a sequence: slot ``s`` of row ``r`` lives in block ``table[r, s // block_size]`` at
    offset ``s % block_size``. Blocks are taken from the pool as a row grows (:meth:`plan_forward`,
    :meth:`grow`) and given back when it is reset or truncated, so the memory a cache touches follows
    the tokens it holds, not ``rows x max_len``; rows are cheap (a table row and a validity row).
    Forked and broadcast rows share their blocks (reference counts) and copy a shared block only when
    they write into it. The pool is allocated empty (``torch.empty``: on CPU its pages are not
    resident until written); a block is zeroed when handed out, so masked slots always hold finite
    numbers (a NaN there would poison attention through ``0 * NaN``).

    Each row has its own length (``lengths``, kept on the CPU so that no device sync is needed to
    slice) and a ``valid`` mask ``(B, max_len)`` remembering which slots hold real tokens, so padded
    prompts and rows at different lengths share one cache.
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
        num_blocks: int | None = None,
        block_size: int = BLOCK_SIZE,
    ) -> None:
        if block_size < 1 or block_size & (block_size - 1):
            raise ValueError(f"block_size must be a power of two, got {block_size}")
        self.block_size = block_size
        self.max_blocks = blocks_for(max_len, block_size)
        #: room for every row at full length (never runs out): row r's blocks start as the run after
        #: block r * max_blocks, the layout of a contiguous cache
        self.home_runs = num_blocks is None
        if num_blocks is None:
            num_blocks = batch_size * self.max_blocks
        self.pool = BlockPool(num_blocks + 1)
        self.prefix = PrefixIndex(block_size)  # prompt prefixes stored once (share_prefix)
        self.pool.on_evict = self.prefix.forget
        # head-major: one head's consecutive blocks are adjacent, so a row whose blocks were taken
        # in order reads as one stream, as a contiguous cache does (block-major read 2-4x slower)
        shape = (num_kv_heads, num_blocks + 1, block_size, head_dim)
        self.k = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.empty(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        for t in (*self.k, *self.v):
            t[:, NULL_BLOCK].zero_()
        self.valid = torch.zeros(batch_size, max_len, dtype=torch.bool, device=device)
        self.lengths = torch.zeros(batch_size, dtype=torch.int64)  # CPU on purpose
        self.table = torch.zeros(batch_size, self.max_blocks, dtype=torch.int64)  # CPU bookkeeping
        self.table_dev = self.table if self.valid.device.type == "cpu" else self.table.to(self.valid.device)
        self.row_blocks: list[list[int]] = [[] for _ in range(batch_size)]  # table[r, :n] as a list
        self.row_reserved: list[deque[int] | None] = [None] * batch_size  # blocks set aside, in order
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
        num_blocks: int | None = None,
    ) -> KVCache:
        """A cache shaped for ``model`` (dtype and device default to the model's own; ``num_blocks``
        defaults to room for every row at full length)."""
        c = model.config
        return cls(
            c.num_hidden_layers,
            batch_size,
            c.num_key_value_heads,
            c.head_dim,
            max_len,
            dtype=dtype or model.kv_dtype,
            device=device or model.device,
            num_blocks=num_blocks,
        )

    @property
    def device(self) -> torch.device:
        """Device the cache tensors live on."""
        return self.valid.device

    @property
    def blocks_total(self) -> int:
        """Blocks that can hold tokens."""
        return self.pool.capacity

    @property
    def blocks_free(self) -> int:
        """Blocks no row holds."""
        return self.pool.n_free

    def _sync(self) -> None:
        if self.table_dev is not self.table:
            self.table_dev.copy_(self.table, non_blocking=False)

    def reserve(self, row: int, n_blocks: int) -> None:
        """Set aside blocks for ``row`` to hold up to ``n_blocks`` blocks, one run when the pool has
        one, so the row fills them in order and the kernel reads it as one stream (the engine does
        this when it admits a request for its whole reservation). The memory is touched only as the
        row fills; :meth:`reset` gives back what it did not use. :class:`OutOfBlocks` (setting
        nothing aside) when too few blocks are free."""
        res = self.row_reserved[row]
        more = n_blocks - len(self.row_blocks[row]) - (len(res) if res is not None else 0)
        got = self.pool.reserve(max(0, more))
        if res is None:
            self.row_reserved[row] = deque(got)
        else:
            res.extend(got)

    def _release(self, row: int, keep: int = 0) -> None:
        """Give back row ``row``'s blocks past its first ``keep``: to the row's reservation when it
        has one and was their only holder (a truncated row grows back into the same blocks), else to
        the pool."""
        held = self.row_blocks[row]
        res = self.row_reserved[row]
        for block in reversed(held[keep:]):
            if res is not None and self.pool.refs[block] == 1 and block not in self.pool.remembered:
                self.pool.refs[block] = 0
                self.pool.n_reserved += 1
                res.appendleft(block)
            else:
                self.pool.drop(block)
        self.table[row, keep : len(held)] = NULL_BLOCK
        del held[keep:]

    def _unreserve(self, row: int) -> None:
        res = self.row_reserved[row]
        if res is not None:
            self.pool.unreserve(list(res))
            self.row_reserved[row] = None

    def _next_blocks(self, row: int, n: int) -> list[int]:
        """``n`` blocks for ``row`` to append: its reservation first, then the pool's blocks right
        after its last one (or, in a cache sized for every row at full length, at its home run)."""
        res = self.row_reserved[row]
        got: list[int] = []
        while res and len(got) < n:
            got.append(res.popleft())
            self.pool.fill(got[-1])
        if len(got) < n:
            held = self.row_blocks[row]
            last = got[-1] if got else held[-1] if held else None
            if last is None and self.home_runs:
                last = row * self.max_blocks  # NULL_BLOCK for row 0: its run starts at block 1
            got.extend(self.pool.take(n - len(got), after=last))
        return got

    def grow(self, rows: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> None:
        """Make slots ``[starts[i], ends[i])`` of ``rows[i]`` writable: take the blocks a row lacks and
        copy the shared blocks it is about to write into (copy-on-write). All or nothing: when the
        pool runs out no block is taken (:class:`OutOfBlocks`)."""
        bs = self.block_size
        held = self.row_blocks
        lack = {r: max(0, blocks_for(e, bs) - len(held[r])) for r, e in zip(rows, ends, strict=True)}
        need = sum(max(0, n - len(self.row_reserved[r] or ())) for r, n in lack.items())
        cow: list[tuple[int, int]] = []  # a shared block's last writer keeps it
        left: dict[int, int] = {}
        for r, s, e in zip(rows, starts, ends, strict=True):
            for i in range(s // bs, min(blocks_for(e, bs), len(held[r])) if e > s else 0):
                b = held[r][i]
                n = left.get(b, self.pool.refs[b])
                if b != NULL_BLOCK and (n > 1 or b in self.pool.remembered):  # others may read it
                    cow.append((r, i))
                    left[b] = n - 1
        if not any(lack.values()) and not cow:
            return
        if need + len(cow) > self.pool.n_unreserved:
            raise OutOfBlocks(
                f"KV cache out of blocks: {need + len(cow)} wanted, {self.pool.n_unreserved} of "
                f"{self.pool.capacity} free"
            )
        copies: list[tuple[int, int]] = []
        for r, i in cow:
            old = held[r][i]
            new = self.pool.take(1, after=held[r][i - 1] if i else None)[0]
            copies.append((old, new))
            held[r][i] = new
            self.table[r, i] = new
        zero: list[int] = []
        for r, n in lack.items():
            if n:
                got = self._next_blocks(r, n)
                self.table[r, len(held[r]) : len(held[r]) + n] = torch.tensor(got, dtype=torch.int64)
                held[r].extend(got)
                zero.extend(got)
        if copies:
            src = torch.tensor([c[0] for c in copies], device=self.device)
            dst = torch.tensor([c[1] for c in copies], device=self.device)
            for t in (*self.k, *self.v):
                t.index_copy_(1, dst, t.index_select(1, src))
            for old, _ in copies:
                self.pool.drop(old)
        if zero:
            idx = torch.tensor(zero, device=self.device)
            for t in (*self.k, *self.v):
                t.index_fill_(1, idx, 0)
        self._sync()

    def share_prefix(self, row: int, ids: Sequence[int]) -> int:
        """Start the empty ``row`` with the cached blocks of the longest block-aligned prefix of
        ``ids`` that other prompts stored (:meth:`remember_prefix`), leaving at least one token to
        compute; the blocks it set aside and no longer needs go back. Returns the tokens it holds."""
        if self.row_blocks[row] or int(self.lengths[row]):
            raise ValueError(f"share_prefix: row {row} is not empty")
        bs = self.block_size
        blocks = self.prefix.match(ids, min((len(ids) - 1) // bs, self.max_blocks))
        if not blocks:
            return 0
        for b in blocks:
            self.pool.revive(b)
        res = self.row_reserved[row]
        if res:
            self.pool.unreserve([res.pop() for _ in range(min(len(blocks), len(res)))])
        n = len(blocks) * bs
        self.row_blocks[row] = list(blocks)
        self.table[row, : len(blocks)] = torch.tensor(blocks, dtype=torch.int64)
        self._sync()
        self.valid[row, :n] = True
        self.lengths[row] = n
        return n

    def remember_prefix(self, row: int, ids: Sequence[int]) -> None:
        """Make the full blocks at the start of ``row`` that hold ``ids`` (its prompt, slot = position:
        no padding before them) available to later prompts starting with the same tokens."""
        bs = self.block_size
        n = min(len(ids), int(self.lengths[row])) // bs * bs
        if n == 0:
            return
        invalid = (~self.valid[row, :n]).nonzero()
        if invalid.numel():
            n = int(invalid[0]) // bs * bs
        for b in self.prefix.add(ids[:n], self.row_blocks[row][: n // bs]):
            self.pool.remember(b)

    def reset(self, rows: Sequence[int] | torch.Tensor | None = None) -> None:
        """Empty some rows (or all) so a finished sequence's slot can take a new request; their blocks
        go back to the pool."""
        idx = (
            torch.arange(self.batch_size) if rows is None else torch.as_tensor(rows, dtype=torch.int64).cpu()
        )
        for r in idx.reshape(-1).tolist():
            self._release(r)
            self._unreserve(r)
        self.lengths[idx] = 0
        self.valid[idx.to(self.device)] = False
        self._sync()

    def fork(self, src: Sequence[int] | torch.Tensor, max_len: int | None = None) -> KVCache:
        """A new cache of ``len(src)`` rows whose row i starts as a copy of this cache's row
        ``src[i]`` (a shared prefix computed once, continued differently per row). ``max_len``
        (default: this cache's) must hold the copied slots. Each source block is copied once; rows
        forked from the same row share it until one writes into it (copy-on-write)."""
        idx = torch.as_tensor(src, dtype=torch.int64).cpu().reshape(-1)
        n = self.max_len
        max_len = n if max_len is None else max_len
        if max_len < n:
            raise ValueError(f"fork max_len {max_len} is shorter than the cache's {n} slots")
        k0 = self.k[0]
        out = KVCache(
            len(self.k), len(idx), k0.shape[0], k0.shape[3], max_len, dtype=k0.dtype, device=self.device,
            block_size=self.block_size,
        )  # fmt: skip
        rows = idx.tolist()
        distinct = list(dict.fromkeys(b for r in rows for b in self.row_blocks[r]))
        mapping = dict(zip(distinct, out.pool.take(len(distinct)), strict=True))
        if distinct:
            s_idx = torch.tensor(distinct, device=self.device)
            d_idx = torch.tensor([mapping[b] for b in distinct], device=self.device)
            for mine, theirs in zip((*self.k, *self.v), (*out.k, *out.v), strict=True):
                theirs.index_copy_(1, d_idx, mine.index_select(1, s_idx))
        seen: set[int] = set()
        for j, r in enumerate(rows):
            blocks = [mapping[b] for b in self.row_blocks[r]]
            for b in blocks:
                if b in seen:
                    out.pool.share(b)
                seen.add(b)
            out.row_blocks[j] = blocks
            out.table[j, : len(blocks)] = torch.tensor(blocks, dtype=torch.int64)
        out._sync()
        dev = idx.to(self.device)
        out.valid[:, :n].copy_(self.valid.index_select(0, dev))
        out.lengths.copy_(self.lengths.index_select(0, idx))
        return out

    def truncate(self, rows: Sequence[int], lengths: Sequence[int]) -> None:
        """Roll ``rows`` back to ``lengths`` slots (e.g. rejected draft tokens): later slots become
        invalid, blocks past the new length go back to the pool and the next forward overwrites the
        rest."""
        if len(rows) != len(lengths):
            raise ValueError(f"truncate: {len(rows)} rows but {len(lengths)} lengths")
        if not len(rows):
            return
        idx = torch.as_tensor(rows, dtype=torch.int64).cpu()
        new = torch.as_tensor(lengths, dtype=torch.int64).cpu()
        if bool((new < 0).any()) or bool((new > self.lengths[idx]).any()):
            raise ValueError(f"truncate: lengths {new.tolist()} outside [0, current length]")
        self.lengths[idx] = new
        for r, n in zip(idx.tolist(), new.tolist(), strict=True):
            self._release(r, keep=blocks_for(n, self.block_size))
        self._sync()
        keep = torch.arange(self.max_len)[None, :] < new[:, None]
        dev = idx.to(self.device)
        self.valid[dev] = self.valid[dev] & keep.to(self.device)

    def broadcast(self, src: int = 0) -> None:
        """Make every row a copy of row ``src`` (one prompt prefilled once, continued by many rows):
        they share its blocks until they write into them."""
        if not 0 <= src < self.batch_size:
            raise ValueError(f"broadcast: row {src} outside [0, {self.batch_size})")
        blocks = self.row_blocks[src]
        for r in range(self.batch_size):
            if r == src:
                continue
            self._release(r)
            for b in blocks:
                self.pool.share(b)
            self.row_blocks[r] = list(blocks)
        self.table[:] = self.table[src]
        self._sync()
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
        grow = rows_cpu.tolist()
        if new_valid is not None:  # rows with no real new token (idle rows) write into the null block
            live = new_valid.any(1).cpu().tolist()
            grow = [r for r, keep in zip(grow, live, strict=True) if keep]
        starts = self.lengths[grow].tolist()
        self.grow(grow, starts, [s + t for s in starts])
        slots = start.to(device)[:, None] + torch.arange(t, device=device)  # (B, T)
        row_idx = torch.arange(batch, device=device) if rows_dev is None else rows_dev
        self.valid[row_idx[:, None], slots] = True if new_valid is None else new_valid.to(device)
        self.lengths[rows_cpu] = start + t
        blocks, offsets = self.locate(row_idx, slots)
        plan = AttentionPlan(
            mask=None, cache=self, rows=rows_dev, slots=slots, kv_len=end, blocks=blocks, offsets=offsets
        )
        if new_valid is None and end == t:
            plan.new_only = True
            return plan
        valid = self.valid[:, :end] if rows_dev is None else self.valid[:, :end].index_select(0, rows_dev)
        plan.mask = build_mask(slots, valid)
        return plan

    def locate(self, rows: torch.Tensor, slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pool block and in-block offset of ``slots`` (B, T) of cache rows ``rows`` (B,), on device."""
        shift = self.block_size.bit_length() - 1
        blocks = self.table_dev[rows[:, None], slots >> shift]
        return blocks, slots & (self.block_size - 1)

    def plan_static(self, slots: torch.Tensor, live: torch.Tensor) -> AttentionPlan:
        """The plan of a static decode step (:meth:`LlamaModel.decode_static`): one new token per row
        at ``slots`` (B,), attention over every slot through the validity mask. The caller has made
        the live rows' slots writable (:meth:`grow`); idle rows write into the null block."""
        rows = torch.arange(slots.shape[0], device=slots.device)
        self.valid[rows, slots] = live
        blocks, offsets = self.locate(rows, slots[:, None])
        return AttentionPlan(
            mask=build_mask(slots[:, None], self.valid),
            cache=self,
            slots=slots[:, None],
            kv_len=self.max_len,
            blocks=blocks,
            offsets=offsets,
        )

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan) -> None:
        """Write this forward's keys/values ``(B, n_kv, T, head_dim)`` into their slots."""
        assert plan.blocks is not None and plan.offsets is not None
        kc, vc = self.k[layer], self.v[layer]
        kc[:, plan.blocks, plan.offsets] = k.transpose(0, 1).to(kc.dtype)
        vc[:, plan.blocks, plan.offsets] = v.transpose(0, 1).to(vc.dtype)

    def read(
        self, layer: int, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys/values attention must read after :meth:`write` (``k``/``v``: the new ones),
        gathered from the rows' blocks into ``(B, n_kv, kv_len, head_dim)``."""
        if plan.new_only:
            return k, v
        n = blocks_for(plan.kv_len, self.block_size)
        table = (
            self.table_dev[:, :n] if plan.rows is None else self.table_dev[:, :n].index_select(0, plan.rows)
        )
        return gather_blocks(self.k[layer], table, plan.kv_len), gather_blocks(
            self.v[layer], table, plan.kv_len
        )


def gather_blocks(pool: torch.Tensor, table: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` slots ``(B, n_kv, length, head_dim)`` of rows whose blocks are ``table``
    (B, n) in ``pool`` (n_kv, num_blocks, block_size, head_dim)."""
    b, n = table.shape
    g, _, bs, d = pool.shape
    out = pool.index_select(1, table.reshape(-1)).view(g, b, n * bs, d).transpose(0, 1)
    return out[:, :, :length]


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
