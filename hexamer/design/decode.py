"""Decoding under hard constraints on an in-process model: FNS base-level sampling and beam search.

A 6-mer's logits give the per-base FNS marginals ``P_j`` (:func:`hexamer.fns.log_base_marginals`);
the bases of the 6-mer are then chosen one after the other, each from ``P_j`` restricted to the
bases the constraints allow *given the bases chosen so far* (inside the same 6-mer too), so a rule
that spans a token boundary or sits inside a token is enforced base by base. A sequence's score is
its exact base-level log-likelihood ``sum_i log P(b_i)`` (untempered marginals), the number
``Carbon.score`` reports. The model runs with a KV cache, one token per step for the whole batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from hexamer.design.constraints import ConstraintSet, Partial
from hexamer.design.spec import DesignError
from hexamer.fns import log_base_marginals
from hexamer.fns.tables import kmer_index
from hexamer.model.kv_cache import KVCache

__all__ = ["Decoded", "beam_search", "random_sequence", "sample_batch"]


@dataclass
class Decoded:
    """One decoded sequence: its bases and base-level log-probabilities (natural log)."""

    sequence: str
    base_log_probs: list[float] = field(repr=False)

    @property
    def log_likelihood(self) -> float:
        return float(sum(self.base_log_probs))


class _Stepper:
    """The model of a local backend run one token per row over a KV cache."""

    def __init__(self, backend: object) -> None:
        model = getattr(backend, "model", None)
        if model is None or getattr(backend, "kind", None) != "local":
            raise DesignError("design runs on an in-process model (Carbon.from_pretrained)")
        self.model = model
        self.layout = backend.layout  # type: ignore[attr-defined]
        self.rows = backend.rows  # type: ignore[attr-defined]
        self.k = self.layout.k
        self.device = model.device

    @torch.inference_mode()
    def start(self, batch: int, tokens: int) -> tuple[KVCache, torch.Tensor]:
        cache = KVCache.for_model(self.model, batch, 1 + tokens)
        ids = torch.full((batch, 1), self.layout.begin_id, device=self.device)
        return cache, self._forward(ids, cache)

    @torch.inference_mode()
    def step(self, cache: KVCache, codes: list[list[int]]) -> torch.Tensor:
        digits = torch.tensor(codes, dtype=torch.int64)
        ids = (kmer_index(digits) + self.layout.kmer_start)[:, None].to(self.device)
        return self._forward(ids, cache)

    def _forward(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        out = self.model(ids, kv_cache=cache, logits_at="last", vocab_rows=self.rows).logits
        return out.reshape(ids.shape[0], -1)


def _log_marginals(logits: torch.Tensor, temperature: float = 1.0) -> np.ndarray:
    x = logits.double()
    if temperature != 1.0:
        x = x / temperature
    return log_base_marginals(x).cpu().numpy()


def _draw(logp: np.ndarray, bits: int, top_p: float, rng: np.random.Generator | None) -> int:
    """A base from ``exp(logp)`` restricted to ``bits`` and renormalised, then top-p (bases sorted by
    probability, ties to A, T, C, G order); ``rng`` None = greedy (ties to the lowest index)."""
    ok = [b for b in range(4) if bits >> b & 1]
    if rng is None or len(ok) == 1:
        return max(ok, key=lambda b: (logp[b], -b))
    top = max(logp[b] for b in ok)
    probs = {b: math.exp(logp[b] - top) for b in ok}
    total = sum(probs.values())
    order = sorted(ok, key=lambda b: (-probs[b], b))
    kept, mass = [], 0.0
    for b in order:
        if kept and mass >= top_p * total:
            break
        kept.append(b)
        mass += probs[b]
    u = rng.random() * sum(probs[b] for b in kept)
    for b in sorted(kept):
        u -= probs[b]
        if u < 0:
            return b
    return max(kept)


class _Row:
    """A partial sequence and its witness (a complete valid sequence extending it) when the rules
    interact (:class:`~hexamer.design.constraints.ConstraintSet`)."""

    __slots__ = ("part", "witness")

    def __init__(
        self, cs: ConstraintSet, part: Partial | None = None, witness: list[int] | None = None
    ) -> None:
        self.part = part if part is not None else Partial(cs.length)
        self.witness = witness if witness is not None or not cs.interacting else cs.first_witness()

    def take(self, cs: ConstraintSet, base: int) -> bool:
        """Append ``base`` if the rest can still be completed (the witness is updated); else False."""
        p, i = self.part, len(self.part)
        if self.witness is not None and self.witness[i] != base:
            p.push(base)
            new = cs.repair(p, self.witness)
            if new is None:
                p.pop()
                return False
            self.witness = new
            return True
        p.push(base)
        return True

    def copy(self) -> _Row:
        out = _Row.__new__(_Row)
        out.part, out.witness = self.part.copy(), self.witness
        return out


def _fill_token(
    cs: ConstraintSet,
    row: _Row,
    n_bases: int,
    logp: np.ndarray,
    top_p: float,
    rng: np.random.Generator | None,
) -> None:
    """Choose the next ``n_bases`` bases of ``row`` (one 6-mer), each drawn among the allowed bases;
    a draw the search cannot complete is struck and redrawn from the rest (the same as drawing from
    the completable bases only). The witness's own base is always completable."""
    for j in range(n_bases):
        left = cs.allowed(row.part)
        while True:
            b = _draw(logp[j], left, top_p, rng)
            if row.take(cs, b):
                break
            left &= ~(1 << b)
            if not left:  # only when the search budget ran out: the witness's base is safe
                assert row.witness is not None
                row.take(cs, row.witness[len(row.part)])
                break


def random_sequence(cs: ConstraintSet, rng: np.random.Generator, k: int = 6) -> str:
    """A sequence meeting ``cs`` drawn without a model: each base uniform among the allowed ones,
    by the same base-by-base walk as decoding (the baseline designed sequences are compared with)."""
    row = _Row(cs)
    flat = np.zeros((k, 4))
    while len(row.part) < cs.length:
        _fill_token(cs, row, min(k, cs.length - len(row.part)), flat, 1.0, rng)
    return row.part.text()


def sample_batch(
    backend: object,
    cs: ConstraintSet,
    rngs: list[np.random.Generator | None],
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    on_token: Callable[[], None] | None = None,
) -> list[Decoded]:
    """One sequence per entry of ``rngs`` (a ``None`` entry decodes greedily), all in one batch."""
    st = _Stepper(backend)
    n, k = cs.length, st.k
    tokens = -(-n // k)
    cache, logits = st.start(len(rngs), tokens)
    rows = [_Row(cs) for _ in rngs]
    parts = [r.part for r in rows]
    scores: list[list[float]] = [[] for _ in rngs]
    for t in range(tokens):
        lm1 = _log_marginals(logits)
        lmt = lm1 if temperature == 1.0 else _log_marginals(logits, temperature)
        width = min(k, n - t * k)
        for r, p in enumerate(parts):
            _fill_token(cs, rows[r], width, lmt[r], top_p, rngs[r])
            scores[r] += [float(lm1[r, j, b]) for j, b in enumerate(p.codes[t * k :])]
        if t + 1 < tokens:
            logits = st.step(cache, [p.codes[t * k :] for p in parts])
        if on_token is not None:
            on_token()
    return [Decoded(p.text(), s) for p, s in zip(parts, scores, strict=True)]


@dataclass
class _Hyp:
    state: _Row
    scores: list[float]
    row: int

    @property
    def total(self) -> float:
        return sum(self.scores)


def beam_search(
    backend: object, cs: ConstraintSet, width: int, *, on_token: Callable[[], None] | None = None
) -> list[Decoded]:
    """Beam search over bases for the highest base-level log-likelihood: every allowed base of every
    hypothesis is scored, the best ``width`` kept after each base (ties: lexicographic sequence);
    the model runs once per 6-mer for the surviving hypotheses. Returns the final beam, best first."""
    if width < 1:
        raise DesignError(f"beam width must be >= 1, got {width}")
    st = _Stepper(backend)
    n, k = cs.length, st.k
    tokens = -(-n // k)
    cache, logits = st.start(1, tokens)
    hyps = [_Hyp(_Row(cs), [], 0)]
    for t in range(tokens):
        lm1 = _log_marginals(logits)
        for j in range(min(k, n - t * k)):
            cands = []
            for h in hyps:
                bits = cs.allowed(h.state.part)
                for b in range(4):
                    if bits >> b & 1:
                        cands.append((h.total + float(lm1[h.row, j, b]), h, b))
            cands.sort(key=lambda c: (-c[0], c[1].state.part.codes, c[2]))
            nxt: list[_Hyp] = []
            for _, h, b in cands:  # best first; the completion search runs only on what is kept
                if len(nxt) == width:
                    break
                state = h.state.copy()
                if state.take(cs, b):
                    nxt.append(_Hyp(state, [*h.scores, float(lm1[h.row, j, b])], h.row))
            if not nxt:  # cannot happen: every witness base is kept or outscored by kept ones
                raise DesignError(f"beam search found no completable base at {t * k + j}")
            hyps = nxt
        if t + 1 < tokens:
            cache = cache.fork([h.row for h in hyps])
            logits = st.step(cache, [h.state.part.codes[t * k :] for h in hyps])
            for i, h in enumerate(hyps):
                h.row = i
        if on_token is not None:
            on_token()
    return [Decoded(h.state.part.text(), h.scores) for h in sorted(hyps, key=lambda h: -h.total)]
