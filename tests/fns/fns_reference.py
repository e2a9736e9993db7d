"""Plain, loop-based reference implementations for the hexamer.fns tests.

Everything works on Python floats / numpy float64 and enumerates k-mers as strings with
itertools.product over "ATCG", so it shares no code path with the package.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

ALPHABET = "ATCG"


def kmers(k: int) -> list[str]:
    return ["".join(p) for p in itertools.product(ALPHABET, repeat=k)]


def random_logits(n_rows: int, k: int, seed: int, scale: float = 2.0, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n_rows, 4**k, generator=g, dtype=torch.float64) * scale).to(dtype)


def softmax(row) -> np.ndarray:
    x = np.asarray(row, dtype=np.float64)
    finite = np.isfinite(x)
    m = x[finite].max()
    e = np.where(finite, np.exp(np.where(finite, x - m, 0.0)), 0.0)
    return e / e.sum()


def marginals(row) -> np.ndarray:
    """(k, 4) base marginals of one row of k-mer logits, ATCG order."""
    p = softmax(row)
    k = round(math.log(len(p), 4))
    out = np.zeros((k, 4))
    for v, s in enumerate(kmers(k)):
        for j, c in enumerate(s):
            out[j, ALPHABET.index(c)] += p[v]
    return out


def prefix_mass(p: np.ndarray, prefix: str) -> float:
    k = round(math.log(len(p), 4))
    return float(sum(p[v] for v, s in enumerate(kmers(k)) if s.startswith(prefix)))


def exact_conditionals(row, target: int) -> list[float]:
    """P(b_j = y_j | b_<j = y_<j) for each j, by summing over the k-mers sharing the prefix."""
    p = softmax(row)
    k = round(math.log(len(p), 4))
    y = kmers(k)[target]
    return [prefix_mass(p, y[: j + 1]) / prefix_mass(p, y[:j]) for j in range(k)]


def first_argmax(values) -> int:
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def greedy(row, allowed=None) -> int:
    """bp greedy: argmax of each marginal among allowed bases, ties to the lowest ATCG index."""
    m = marginals(row)
    k = m.shape[0]
    f = 0
    for j in range(k):
        cand = [b for b in range(4) if allowed is None or allowed[j][b]]
        vals = [m[j, b] for b in cand]
        f = 4 * f + cand[first_argmax(vals)]
    return f


def nucleus_keep(probs, top_p: float) -> list[bool]:
    """Shortest prefix in (descending prob, then index) order whose mass reaches top_p."""
    total = sum(probs)
    order = sorted(range(len(probs)), key=lambda i: (-probs[i], i))
    keep = [False] * len(probs)
    mass = 0.0
    for rank, i in enumerate(order):
        if rank > 0 and (mass >= top_p * total or probs[i] == 0):
            break
        keep[i] = True
        mass += probs[i]
    return keep


def bp_probs(row, temperature=1.0, top_p=1.0, allowed=None) -> np.ndarray:
    """The per-position distributions bp sampling should draw from."""
    m = marginals(np.asarray(row, dtype=np.float64) / temperature)
    k = m.shape[0]
    out = np.zeros_like(m)
    for j in range(k):
        q = [m[j, b] if (allowed is None or allowed[j][b]) else 0.0 for b in range(4)]
        s = sum(q)
        q = [x / s for x in q]
        if top_p < 1.0:
            keep = nucleus_keep(q, top_p)
            q = [x if kp else 0.0 for x, kp in zip(q, keep, strict=True)]
        s = sum(q)
        out[j] = [x / s for x in q]
    return out


def token_probs(row, temperature=1.0, top_p=1.0, allowed=None) -> np.ndarray:
    x = np.asarray(row, dtype=np.float64) / temperature
    if allowed is not None:
        x = np.where(np.asarray(allowed), x, -np.inf)
    p = softmax(x)
    if top_p < 1.0:
        keep = nucleus_keep(list(p), top_p)
        p = np.where(keep, p, 0.0)
    return p / p.sum()


def log_softmax_full(row) -> np.ndarray:
    x = np.asarray(row, dtype=np.float64)
    m = x.max()
    return x - (m + math.log(np.exp(x - m).sum()))
