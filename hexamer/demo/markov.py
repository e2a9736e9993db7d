"""A next-base Markov chain: the reference point every DNA language model has to beat.

Base ``i`` is predicted from the ``order`` bases right before it, with counts from both strands of
the training sequences and add-``alpha`` smoothing. Where the full context is unseen (or runs off
the start of the sequence, or holds a non-ACGT base) the chain backs off to the longest shorter
context it has seen, like :func:`hexamer.train.evaluate.markov_accuracy` (``aligned=False``), so
the two give the same argmax predictions. Counting uses ``np.bincount`` over rolling k-mer codes:
a few megabases fit in about a second.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from hexamer.io.sequences import reverse_complement

__all__ = ["ACGT", "NextBaseMarkov", "acgt_codes"]

ACGT = "ACGT"
_CODE = np.full(256, -1, dtype=np.int64)
for _i, _b in enumerate(b"ACGT"):
    _CODE[_b] = _i
    _CODE[ord(chr(_b).lower())] = _i


def acgt_codes(bases: str) -> np.ndarray:
    """A, C, G, T -> 0..3 (either case); anything else -> -1."""
    return _CODE[np.frombuffer(bases.encode("ascii"), dtype=np.uint8)]


def _context_codes(codes: np.ndarray, order: int) -> np.ndarray:
    """Base-4 code of the ``order`` bases before each position (-1 if incomplete or non-ACGT)."""
    n = len(codes)
    ctx = np.zeros(n, dtype=np.int64)
    bad = np.zeros(n, dtype=bool)
    bad[: min(order, n)] = True
    for m in range(1, order + 1):  # base i - m has weight 4 ** (m - 1)
        prev = np.full(n, -1, dtype=np.int64)
        prev[m:] = codes[: n - m] if n > m else prev[m:]
        bad |= prev < 0
        ctx += np.where(prev >= 0, prev, 0) * 4 ** (m - 1)
    ctx[bad] = -1
    return ctx


class NextBaseMarkov:
    """Order-``order`` next-base Markov chain over A, C, G, T (columns in that order)."""

    def __init__(self, order: int = 6, alpha: float = 1.0) -> None:
        if not 0 <= order <= 12:
            raise ValueError(f"order must be in 0..12, got {order}")
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        self.order = order
        self.alpha = alpha
        self.counts = [np.zeros((4**o, 4), dtype=np.int64) for o in range(order + 1)]

    def fit(self, sequences: Iterable[str], *, both_strands: bool = True) -> NextBaseMarkov:
        """Add the counts of ``sequences`` (and of their reverse complements)."""
        for seq in sequences:
            strands = (seq, reverse_complement(seq)) if both_strands else (seq,)
            for s in strands:
                codes = acgt_codes(s)
                ok = codes >= 0
                for o in range(self.order + 1):
                    ctx = _context_codes(codes, o) if o else np.zeros(len(codes), dtype=np.int64)
                    use = ok & (ctx >= 0)
                    flat = np.bincount(ctx[use] * 4 + codes[use], minlength=4 ** (o + 1))
                    self.counts[o] += flat.reshape(-1, 4)
        return self

    def _rows(self, codes: np.ndarray) -> np.ndarray:
        """Smoothed count rows ``(L, 4)`` of the longest seen context of every position."""
        n = len(codes)
        rows = np.zeros((n, 4), dtype=np.float64)
        done = np.zeros(n, dtype=bool)
        for o in range(self.order, -1, -1):
            ctx = _context_codes(codes, o) if o else np.zeros(n, dtype=np.int64)
            todo = ~done & (ctx >= 0)
            got = self.counts[o][ctx[todo]]
            seen = got.sum(1) > 0 if o else np.ones(len(got), dtype=bool)
            idx = np.flatnonzero(todo)[seen]
            rows[idx] = got[seen]
            done[idx] = True
        return rows + self.alpha

    def log_probs(self, bases: str) -> np.ndarray:
        """``(L, 4)`` natural-log P(base i = b | the bases before it), columns A, C, G, T."""
        rows = self._rows(acgt_codes(bases))
        return np.log(rows / rows.sum(1, keepdims=True))

    def score(self, bases: str) -> float:
        """Mean log P(true base) over the A/C/G/T positions (nats/base)."""
        codes = acgt_codes(bases)
        lp = self.log_probs(bases)
        ok = codes >= 0
        return float(lp[np.flatnonzero(ok), codes[ok]].mean())

    def accuracy(self, bases: str) -> tuple[int, int]:
        """(right, total): argmax predictions that equal the true base, over A/C/G/T positions."""
        codes = acgt_codes(bases)
        pred = self._rows(codes).argmax(1)
        ok = codes >= 0
        return int((pred[ok] == codes[ok]).sum()), int(ok.sum())

    def greedy(self, prompt: str, n: int) -> str:
        """Continue ``prompt`` by ``n`` bases, always taking the most likely next base."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out = list(prompt[-self.order :] if self.order else "")
        for _ in range(n):
            ctx = "".join(out[-self.order :]) if self.order else ""
            out.append(ACGT[int(self._rows(acgt_codes(ctx + "A"))[-1].argmax())])
        return "".join(out[len(out) - n :]) if n else ""
