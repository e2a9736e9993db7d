"""Speculative decoding: a small draft model proposes 6-mers, the target checks them in one forward.

Each round, per request:

1. the draft proposes ``k`` tokens ``d_1..d_k`` one by one from its own (masked, tempered,
   nucleus-cut) distributions ``q_1..q_k``, using its own KV cache;
2. the target runs **one** forward over ``[last committed token, d_1, ..., d_k]`` and so gets
   ``p_1..p_{k+1}`` (``p_i`` is the target's distribution for the slot of ``d_i``);
3. ``d_i`` is accepted with probability ``min(1, p_i(d_i) / q_i(d_i))``, in order; at the first
   rejection a replacement is drawn from ``norm(max(0, p_i - q_i))`` and the round ends; if all ``k``
   are accepted a bonus token is drawn from ``p_{k+1}``. Greedy decoding accepts ``d_i`` iff it is
   the target's argmax and emits the target's argmax at the first mismatch, so greedy output equals
   target-only greedy output token for token;
4. both KV caches are rolled back to the committed tokens (per-row lengths cut, the ``valid`` mask
   cleared behind them, so a rejected slot can never be attended to and is overwritten next).

Token mode uses the distribution over the 4**k k-mers that :func:`hexamer.fns.token_sample` draws
from. bp mode draws each base independently from its FNS marginal, so the distribution it actually
samples a 6-mer from is the product of the six per-base distributions
(:func:`hexamer.fns.bp_sampling_probs`); that product is the ``p`` (and ``q``) used above, which makes
speculative bp output distributed exactly as target-only bp output. Masks (per-base, IUPAC) and the
forced tail of a prompt's partial 6-mer restrict both ``p`` and ``q`` at every token index.

``k`` is fixed or adaptive: each request keeps a decayed estimate of the per-token acceptance rate
``alpha`` and picks the ``k`` in ``[1, k_max]`` that maximises expected tokens per unit of work,
``(1 - alpha**(k+1)) / (1 - alpha) / (1 + c*k)``, where ``c`` is the draft's cost per forward relative
to the target's (estimated from the models' per-token FLOPs unless given). The schedule depends only
on the request's own accept/reject history, never on timings, so a seed fixes the output.
Batches of any size run together (each row has its own ``k``, acceptance length and cache length).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from hexamer.engine.request import Request
from hexamer.fns import (
    bp_greedy,
    bp_sampling_probs,
    kmer_index,
    kmer_mask_from_positions,
    sample_from_probs,
    token_greedy,
    token_sampling_probs,
)
from hexamer.model import KVCache, LlamaModel, pad_rows
from hexamer.tokenizer.layout import BASES, DnaLayout

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = [
    "AdaptiveK",
    "SpecBatch",
    "SpecConfig",
    "SpecStats",
    "SpeculativeDecoder",
    "accept_draft",
    "check_compatible",
    "product_distribution",
    "residual_distribution",
    "run_speculative",
]

NumSpeculative = int | Literal["auto"]


# --------------------------------------------------------------------------- configuration, stats


@dataclass(frozen=True)
class SpecConfig:
    """How many tokens the draft proposes per round.

    ``k`` is the first round's draft length (and every round's when ``adaptive`` is off);
    adaptive rounds choose within ``[1, k_max]``. ``draft_cost`` is the cost of one draft forward
    relative to one target forward (None: estimated from per-token FLOPs). ``max_batch_size``
    bounds the rows decoded together.
    """

    k: int = 4
    adaptive: bool = True
    k_max: int = 8
    draft_cost: float | None = None
    max_batch_size: int = 16

    def __post_init__(self) -> None:
        for name in ("k", "k_max", "max_batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.k > self.k_max:
            raise ValueError(f"k={self.k} exceeds k_max={self.k_max}")
        if self.draft_cost is not None and not (
            isinstance(self.draft_cost, int | float)
            and math.isfinite(self.draft_cost)
            and self.draft_cost >= 0
        ):
            raise ValueError(f"draft_cost must be a finite number >= 0, got {self.draft_cost!r}")

    @classmethod
    def from_option(cls, num_speculative: NumSpeculative | SpecConfig) -> SpecConfig:
        """``"auto"`` -> adaptive k in [1, 8] starting at 4; an int k -> that k every round."""
        if isinstance(num_speculative, SpecConfig):
            return num_speculative
        if num_speculative == "auto":
            return cls()
        if isinstance(num_speculative, str):
            try:
                num_speculative = int(num_speculative)
            except ValueError:
                raise ValueError(
                    f"num_speculative must be a positive integer or 'auto', got {num_speculative!r}"
                ) from None
        if not isinstance(num_speculative, int) or isinstance(num_speculative, bool) or num_speculative < 1:
            raise ValueError(f"num_speculative must be a positive integer or 'auto', got {num_speculative!r}")
        return cls(k=num_speculative, adaptive=False, k_max=num_speculative)


@dataclass
class SpecStats:
    """What speculative decoding did, summed over requests.

    A *row round* is one request's share of a target verify forward. ``accepted_per_forward`` is the
    mean number of draft tokens accepted per row round; ``tokens_per_forward`` counts the token the
    target adds (replacement or bonus) too, so plain decoding would score 1.0.
    """

    row_rounds: int = 0
    target_forwards: int = 0  # batched verify forwards (prefill not counted)
    draft_forwards: int = 0  # batched draft forwards (prefill not counted)
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    k_counts: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed draft tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def accepted_per_forward(self) -> float:
        return self.accepted / self.row_rounds if self.row_rounds else 0.0

    @property
    def tokens_per_forward(self) -> float:
        return self.emitted / self.row_rounds if self.row_rounds else 0.0

    @property
    def mean_k(self) -> float:
        n = sum(self.k_counts.values())
        return sum(k * c for k, c in self.k_counts.items()) / n if n else 0.0

    def merge(self, other: SpecStats) -> None:
        for name in (
            "row_rounds",
            "target_forwards",
            "draft_forwards",
            "drafted",
            "accepted",
            "emitted",
            "seconds",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.k_counts.update(other.k_counts)

    def summary(self) -> str:
        return (
            f"acceptance {self.acceptance_rate:.1%}, {self.accepted_per_forward:.2f} draft tokens accepted "
            f"and {self.tokens_per_forward:.2f} tokens per target forward, mean k {self.mean_k:.2f}"
        )


# --------------------------------------------------------------------------- adaptive k


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens one round emits with ``k`` drafts at per-token acceptance ``alpha``."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def best_k(alpha: float, draft_cost: float, k_max: int) -> int:
    """The k in [1, k_max] with most expected tokens per unit of work (target forward = 1)."""
    scores = [expected_tokens(alpha, k) / (1.0 + draft_cost * k) for k in range(1, k_max + 1)]
    return 1 + int(np.argmax(scores))


class AdaptiveK:
    """One request's draft length: fixed, or chosen from a decayed acceptance estimate.

    Each round is evidence about ``alpha``: ``a`` accepted tokens and one rejection unless all were
    accepted (a geometric sample), so ``alpha = accepted / (accepted + rejections)``; every observed
    token discounts older evidence by ``decay`` (memory of ~1/(1-decay) tokens), and the prior is
    worth two tokens at 0.7.
    """

    def __init__(self, config: SpecConfig, draft_cost: float, decay: float = 0.9) -> None:
        self.config = config
        self.draft_cost = draft_cost
        self.decay = decay
        self.k = config.k
        self.successes = 1.4
        self.trials = 2.0

    @property
    def alpha(self) -> float:
        return self.successes / self.trials

    def update(self, drafted: int, accepted: int) -> None:
        if drafted == 0 or not self.config.adaptive:
            return
        observed = accepted + (1 if accepted < drafted else 0)
        fade = self.decay**observed
        self.successes = fade * self.successes + accepted
        self.trials = fade * self.trials + observed
        self.k = best_k(self.alpha, self.draft_cost, self.config.k_max)


def _flops_per_token(model: LlamaModel, head_rows: int) -> float:
    c = model.config
    h, f, hd = c.hidden_size, c.intermediate_size, c.head_dim
    attn = h * hd * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    return float(c.num_hidden_layers * (attn + 3 * h * f) + head_rows * h)


def estimate_draft_cost(target: LlamaModel, draft: LlamaModel, head_rows: int) -> float:
    """Draft forward cost relative to a target forward, from per-token FLOPs (floor 0.02)."""
    return max(0.02, _flops_per_token(draft, head_rows) / _flops_per_token(target, head_rows))


# --------------------------------------------------------------------------- the maths


def product_distribution(per_base: torch.Tensor) -> torch.Tensor:
    """``(N, k, 4)`` per-position base distributions -> ``(N, 4**k)`` distribution of the k-mer whose
    bases are drawn independently (index = sum d_j 4**(k-1-j), first base most significant)."""
    n, k, _ = per_base.shape
    out = per_base[:, 0]
    for j in range(1, k):
        out = (out[:, :, None] * per_base[:, j, None, :]).reshape(n, -1)
    return out


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm(max(0, p - q))`` over the last dimension; ``p`` itself where the residual has no mass
    (only possible when p == q up to rounding, where a rejection cannot happen in exact arithmetic)."""
    res = torch.clamp(p - q, min=0.0)
    total = res.sum(-1, keepdim=True)
    return torch.where(total > 0, res / torch.where(total > 0, total, 1.0), p)


def accept_draft(p_draft: torch.Tensor, q_draft: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """How many leading drafts are accepted: draft i passes iff ``u_i * q_i(d_i) < p_i(d_i)``
    (probability ``min(1, p/q)``). Inputs ``(..., n)`` hold p and q *at the drafted tokens*."""
    ok = uniforms * q_draft < p_draft
    return torch.cumprod(ok.to(torch.int64), dim=-1).sum(-1)


# --------------------------------------------------------------------------- model helpers


def _feed(
    model: LlamaModel,
    cache: KVCache,
    rows: list[int],
    seqs: list[list[int]],
    logits: Literal["all", "last", "none"],
    vocab_rows: tuple[int, int],
    pad_id: int,
) -> torch.Tensor | None:
    """Append each row's tokens (right-padded to a common width, the padding rolled back afterwards).

    Returns k-mer logits ``(B, T, V)`` (``all``) or at each row's last real token ``(B, V)``.
    """
    lengths = [len(s) for s in seqs]
    width = max(lengths)
    if width == 0:
        return None
    before = cache.lengths[torch.tensor(rows)].tolist()
    device = model.device
    batch = pad_rows(seqs, pad_id)
    ragged = batch.mask is not None
    cache_rows = None if rows == list(range(cache.batch_size)) else rows
    at: Literal["all", "last", "none"] | torch.Tensor = logits
    if logits == "last" and ragged:
        at = torch.tensor([max(n - 1, 0) for n in lengths], device=device)
    out = model(
        batch.ids_on(device),
        kv_cache=cache,
        attention_mask=batch.mask_on(device),
        cache_rows=cache_rows,
        logits_at=at,
        vocab_rows=vocab_rows,
    )
    if ragged:
        cache.truncate(rows, [b + n for b, n in zip(before, lengths, strict=True)])
    return out.logits


# --------------------------------------------------------------------------- compatibility


def check_compatible(target: Carbon, draft: Carbon) -> None:
    """Raise ``ValueError`` unless the draft reads and writes the same token ids as the target."""
    if draft.layout != target.layout:
        raise ValueError(
            f"draft and target DNA layouts differ (draft: DNA block at {draft.layout.dna_start_id}, k={draft.layout.k}; "
            f"target: DNA block at {target.layout.dna_start_id}, k={target.layout.k}); "
            "speculative decoding needs two models with the same tokenizer"
        )
    if draft.model.config.vocab_size != target.model.config.vocab_size or len(draft.tokenizer) != len(
        target.tokenizer
    ):
        raise ValueError(
            f"draft vocabulary ({len(draft.tokenizer)} tokens, model {draft.model.config.vocab_size}) differs from the "
            f"target's ({len(target.tokenizer)}, model {target.model.config.vocab_size}); "
            "speculative decoding needs two models with the same tokenizer"
        )
    probe = "<mammalian_species> The quick brown fox, 0123. <dna>ACGTACGGT"
    if draft.tokenizer.encode(probe) != target.tokenizer.encode(probe):
        raise ValueError("draft and target tokenizers encode text differently; they must share one tokenizer")


# --------------------------------------------------------------------------- decoding


@dataclass(eq=False)
class _Row:
    req: Request
    row: int
    ctl: AdaptiveK
    constraint: np.ndarray
    constrained: set[int]
    t_pending: list[int] = field(default_factory=list)
    d_pending: list[int] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return self.req.n_tokens - self.req.n_generated

    def allowed(self, t: int) -> np.ndarray | None:
        if t not in self.constrained:
            return None
        k = self.req.k
        return self.constraint[t * k : (t + 1) * k]


def _constraint(req: Request) -> tuple[np.ndarray, set[int]]:
    """Per-base A,T,C,G allowed mask over every token the request generates (forced tail + mask)."""
    k = req.k
    c = np.ones((req.n_tokens * k, 4), dtype=bool)
    for i, base in enumerate(req.forced):
        c[i] = False
        c[i, BASES.index(base)] = True
    mask = req.params.mask_atcg
    if mask is not None:
        start = len(req.forced)
        c[start : start + len(mask)] = mask
    constrained = {t for t in range(req.n_tokens) if not c[t * k : (t + 1) * k].all()}
    return c, constrained


class SpecBatch:
    """One batch of requests (same mode, temperature and top_p) decoded speculatively to the end.

    Invariant between rounds: the target cache holds every committed token but the last
    (``t_pending``, fed first by the next verify); the draft cache holds all but ``d_pending``
    (one token, or two after a round whose drafts were all accepted).
    """

    def __init__(
        self,
        target: LlamaModel,
        draft: LlamaModel,
        layout: DnaLayout,
        requests: list[Request],
        config: SpecConfig,
        draft_cost: float,
    ) -> None:
        if not requests:
            raise ValueError("no requests to decode")
        p = requests[0].params
        for r in requests:
            q = r.params
            if (q.mode, q.temperature, q.top_p) != (p.mode, p.temperature, p.top_p):
                raise ValueError("a speculative batch needs one mode, temperature and top_p")
            if q.stop_at_end_tag:
                raise ValueError("speculative decoding does not support stop_at_end_tag")
        self.target, self.draft, self.layout, self.config = target, draft, layout, config
        self.mode, self.temperature, self.top_p, self.greedy = p.mode, p.temperature, p.top_p, p.greedy
        self.vocab_rows = (layout.kmer_start, layout.kmer_stop)
        self.rows: list[_Row] = []
        for i, req in enumerate(requests):
            c, constrained = _constraint(req)
            self.rows.append(_Row(req, i, AdaptiveK(config, draft_cost), c, constrained))
        max_len = max(r.total_len for r in requests) + config.k_max + 2
        self.tcache = KVCache.for_model(target, len(requests), max_len)
        self.dcache = KVCache.for_model(draft, len(requests), max_len)
        self.stats = SpecStats()
        self._prefilled = False

    @property
    def done(self) -> bool:
        return all(r.remaining <= 0 for r in self.rows)

    def _feed(self, which: Literal["target", "draft"], rows: list[_Row], seqs: list[list[int]], logits):
        model, cache = (self.target, self.tcache) if which == "target" else (self.draft, self.dcache)
        return _feed(
            model, cache, [r.row for r in rows], seqs, logits, self.vocab_rows, self.layout.kmer_start
        )

    @torch.inference_mode()
    def prefill(self) -> None:
        """Both caches take every prompt token but the last, which the first round feeds."""
        seqs = [r.req.prompt_ids[:-1] for r in self.rows]
        self._feed("target", self.rows, seqs, "none")
        self._feed("draft", self.rows, seqs, "none")
        for r in self.rows:
            r.t_pending = [r.req.prompt_ids[-1]]
            r.d_pending = [r.req.prompt_ids[-1]]
        self._prefilled = True

    # ------------------------------------------------------------------ distributions
    def _allowed(self, pairs: list[tuple[_Row, int]]) -> torch.Tensor | None:
        masks = [r.allowed(t) for r, t in pairs]
        if all(m is None for m in masks):
            return None
        k = self.layout.k
        out = torch.ones((len(pairs), k, 4), dtype=torch.bool)
        for i, m in enumerate(masks):
            if m is not None:
                out[i] = torch.from_numpy(m)
        return out

    def _greedy(self, logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        if self.mode == "bp":
            return bp_greedy(logits, allowed=allowed)
        kmers = kmer_mask_from_positions(allowed) if allowed is not None else None
        return token_greedy(logits, allowed_kmers=kmers)

    def _per_base(self, logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        return bp_sampling_probs(logits, temperature=self.temperature, top_p=self.top_p, allowed=allowed)

    def _dist(self, logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
        """``(N, 4**k)`` float64: the distribution target-only decoding samples a token from."""
        if self.mode == "bp":
            return product_distribution(self._per_base(logits, allowed))
        kmers = kmer_mask_from_positions(allowed) if allowed is not None else None
        return token_sampling_probs(
            logits, temperature=self.temperature, top_p=self.top_p, allowed_kmers=kmers
        )

    def _rand(self, r: _Row, n: int) -> torch.Tensor:
        return torch.rand(n, dtype=torch.float64, generator=r.req.generator)

    def _draft_pick(
        self, group: list[_Row], logits: torch.Tensor, step: int
    ) -> tuple[list[int], list[torch.Tensor | None]]:
        """Draft token (k-mer index) and its distribution q for each row at draft step ``step``."""
        allowed = self._allowed([(r, r.req.n_generated + step) for r in group])
        if self.greedy:
            return self._greedy(logits, allowed).tolist(), [None] * len(group)
        k = self.layout.k
        if self.mode == "bp":
            per_base = self._per_base(logits, allowed)  # (N, k, 4)
            u = torch.stack([self._rand(r, k) for r in group]).to(per_base.device)
            picks = kmer_index(sample_from_probs(per_base, u))
            q = product_distribution(per_base)
        else:
            q = self._dist(logits, allowed)
            u = torch.cat([self._rand(r, 1) for r in group]).to(q.device)
            picks = sample_from_probs(q, u)
        return picks.tolist(), list(q.unbind(0))

    # ------------------------------------------------------------------ one round
    @torch.inference_mode()
    def step(self) -> list[Request]:
        """One draft-and-verify round for every unfinished row; returns requests that finished."""
        if not self._prefilled:
            self.prefill()
        active = [r for r in self.rows if r.remaining > 0]
        if not active:
            return []
        ks = {r.row: min(r.ctl.k, r.remaining - 1) for r in active}
        drafts: dict[int, list[int]] = {r.row: [] for r in active}
        qs: dict[int, list[torch.Tensor | None]] = {r.row: [] for r in active}
        d_before = {r.row: int(self.dcache.lengths[r.row]) for r in active}
        t_before = {r.row: int(self.tcache.lengths[r.row]) for r in active}
        kmer0 = self.layout.kmer_start

        group = [r for r in active if ks[r.row] >= 1]
        step = 0
        while group:
            seqs = [r.d_pending if step == 0 else [kmer0 + drafts[r.row][-1]] for r in group]
            logits = self._feed("draft", group, seqs, "last")
            self.stats.draft_forwards += 1
            picks, q = self._draft_pick(group, logits.to(self.target.device), step)
            for r, d, qq in zip(group, picks, q, strict=True):
                drafts[r.row].append(d)
                qs[r.row].append(qq)
            step += 1
            group = [r for r in group if ks[r.row] > step]

        seqs = [r.t_pending + [kmer0 + d for d in drafts[r.row]] for r in active]
        logits = self._feed("target", active, seqs, "all")
        self.stats.target_forwards += 1
        # every (row, position) the target scored, in one batched distribution call
        pairs = [(r, r.req.n_generated + i) for r in active for i in range(ks[r.row] + 1)]
        flat = torch.cat([logits[b, : ks[r.row] + 1] for b, r in enumerate(active)])
        allowed = self._allowed(pairs)
        if self.greedy:
            target_pick = self._greedy(flat, allowed).tolist()
        else:
            p_all = self._dist(flat, allowed)
        finished: list[Request] = []
        t_keep: list[int] = []
        d_rows: list[int] = []
        d_keep: list[int] = []
        offset = 0
        for r in active:
            n = ks[r.row]
            d = drafts[r.row]
            if self.greedy:
                tp = target_pick[offset : offset + n + 1]
                a = 0
                while a < n and d[a] == tp[a]:
                    a += 1
                y = tp[a]
            else:
                p = p_all[offset : offset + n + 1]
                if n:
                    idx = torch.tensor(d, device=p.device)
                    q = torch.stack(qs[r.row])  # (n, V)
                    rows_n = torch.arange(n, device=p.device)
                    a = int(accept_draft(p[rows_n, idx], q[rows_n, idx], self._rand(r, n).to(p.device)))
                else:
                    a = 0
                dist = residual_distribution(p[a], qs[r.row][a]) if a < n else p[n]
                y = int(sample_from_probs(dist, self._rand(r, 1)[0].to(dist.device)))
            offset += n + 1
            new = [*d[:a], y]
            for token in new:
                r.req.append(token)
            # roll back: the target keeps its pending token and the accepted drafts
            t_keep.append(t_before[r.row] + 1 + a)
            if n == 0:
                r.d_pending = [*r.d_pending, kmer0 + y]
            elif a < n:
                d_rows.append(r.row)
                d_keep.append(d_before[r.row] + len(r.d_pending) + a)
                r.d_pending = [kmer0 + y]
            else:  # all accepted: the draft never ran its last draft
                r.d_pending = [kmer0 + d[-1], kmer0 + y]
            r.t_pending = [kmer0 + y]
            r.ctl.update(n, a)
            self.stats.row_rounds += 1
            self.stats.drafted += n
            self.stats.accepted += a
            self.stats.emitted += len(new)
            self.stats.k_counts[n] += 1
            if r.remaining <= 0:
                finished.append(r.req)
        self.tcache.truncate([r.row for r in active], t_keep)
        self.dcache.truncate(d_rows, d_keep)
        return finished

    def run(self, on_step: Callable[[list[Request]], None] | None = None) -> SpecStats:
        start = time.perf_counter()
        while not self.done:
            finished = self.step()
            if on_step is not None:
                on_step(finished)
        self.stats.seconds += time.perf_counter() - start
        return self.stats


class SpeculativeDecoder:
    """Speculative decoding with a target and a draft :class:`LlamaModel` sharing a DNA layout.

    Requests are engine :class:`~hexamer.engine.Request` objects (prompt ids ending on a 6-mer
    boundary, forced tail, :class:`~hexamer.engine.SamplingParams`); they are filled in place.
    """

    def __init__(
        self,
        target: LlamaModel,
        draft: LlamaModel,
        layout: DnaLayout,
        config: SpecConfig | None = None,
    ) -> None:
        if target.config.vocab_size != draft.config.vocab_size:
            raise ValueError(
                f"draft vocab_size {draft.config.vocab_size} != target vocab_size {target.config.vocab_size}"
            )
        if layout.kmer_stop > target.config.vocab_size:
            raise ValueError(
                f"DNA layout ends at {layout.kmer_stop}, beyond the models' {target.config.vocab_size} rows"
            )
        self.target, self.draft, self.layout = target, draft, layout
        self.config = config or SpecConfig()
        self.draft_cost = (
            self.config.draft_cost
            if self.config.draft_cost is not None
            else estimate_draft_cost(target, draft, layout.n_kmers)
        )
        self.stats = SpecStats()

    def check(self, request: Request) -> None:
        """Raise ``ValueError`` if a request cannot be decoded speculatively."""
        if request.params.stop_at_end_tag:
            raise ValueError("speculative decoding does not support stop_at_end_tag")
        for name, model in (("target", self.target), ("draft", self.draft)):
            limit = model.config.max_position_embeddings
            if request.total_len > limit:
                raise ValueError(
                    f"prompt of {len(request.prompt_ids)} tokens + {request.n_tokens} new tokens exceeds the "
                    f"{name} model's context of {limit} tokens"
                )

    def run(
        self, requests: Sequence[Request], on_step: Callable[[list[Request]], None] | None = None
    ) -> SpecStats:
        """Decode every request to the end; returns (and accumulates into ``self.stats``) the stats."""
        todo = list(requests)
        for r in todo:
            self.check(r)
        groups: dict[tuple, list[Request]] = {}
        for r in todo:
            p = r.params
            groups.setdefault((p.mode, p.temperature, p.top_p), []).append(r)
        stats = SpecStats()
        size = self.config.max_batch_size
        for group in groups.values():
            for i in range(0, len(group), size):
                batch = SpecBatch(
                    self.target, self.draft, self.layout, group[i : i + size], self.config, self.draft_cost
                )
                stats.merge(batch.run(on_step))
        self.stats.merge(stats)
        return stats


def run_speculative(
    target: Carbon,
    draft: Carbon,
    requests: Sequence[Request],
    *,
    num_speculative: NumSpeculative | SpecConfig = "auto",
    on_step: Callable[[list[Request]], None] | None = None,
) -> SpecStats:
    """What ``Carbon.generate(..., draft=...)`` runs: check the pair, then decode the requests."""
    check_compatible(target, draft)
    decoder = SpeculativeDecoder(
        target.model, draft.model, target.layout, SpecConfig.from_option(num_speculative)
    )
    return decoder.run(requests, on_step)
