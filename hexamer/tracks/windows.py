"""Strided sliding windows: per-base log-probabilities for sequences longer than the context.

A sequence of ``L`` bases is ``T = ceil(L / k)`` tokens. When it fits the model (``prefix +
<dna> + T`` tokens at most the longest prompt), it is scored in one forward, exactly as without a
stride. Otherwise windows of ``W`` tokens (``window`` bases, default: as many as fit) start every
``S`` tokens (``stride`` bases, a multiple of ``k``): window ``j`` holds tokens
``[j*S, min(j*S + W, T))``, the first window covers the start, the last one reaches the end.

**Rule.** Each base takes its value from the window in which it has the most left context, that
is the *earliest* window holding it. Window 0 gives tokens ``[0, W)``; window ``j >= 1`` gives
its last ``S`` tokens ``[(j-1)*S + W, j*S + W)``. So the first ``W`` tokens see everything before
them, and every later base sees between ``W - S`` and ``W - 1`` earlier tokens of its own window
(its earlier bases in the same 6-mer included): a smaller stride buys more context per base for
``W / S`` times the compute.

Windows start on a ``k``-mer boundary of the sequence, so every window tokenises its bases
exactly as the whole sequence does (same 6-mers, same ``<oov>`` chunks, same padded tail): that
is why ``stride`` and ``window`` must be multiples of ``k``. Each window is scored by the
model's own public methods (``score`` / ``base_logprobs``) as a sequence of its own.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from hexamer.backend.results import warn_unscored

__all__ = [
    "Window",
    "check_stride",
    "plan_windows",
    "scored_bases",
    "strided_base_logprobs",
    "strided_score",
    "window_capacity",
]


class _Scorer(Protocol):
    """What the strided functions use of a model: a ``hexamer.Carbon``, local or served."""

    layout: Any
    tokenizer: Any

    @property
    def max_prompt_tokens(self) -> int: ...

    def score(self, sequences: Any, **options: Any) -> Any: ...

    def base_logprobs(self, sequence: str, **options: Any) -> np.ndarray: ...

    def check_sequence(self, sequence: str, *, prefix: str = "") -> None: ...


@dataclass(frozen=True)
class Window:
    """One window, in bases of the sequence (0-based, end exclusive): the model reads
    ``[start, end)`` and the window gives the values of ``[keep_start, keep_end)``."""

    start: int
    end: int
    keep_start: int
    keep_end: int


def window_capacity(model: _Scorer, prefix: str = "") -> int:
    """Most DNA tokens one window can hold: the longest prompt less the prefix and ``<dna>``."""
    used = len(model.tokenizer.encode(prefix)) if prefix else 0
    return int(model.max_prompt_tokens) - used - 1


def check_stride(stride: int, window: int, k: int) -> None:
    """``stride`` (bases) must be an integer with ``k <= stride <= window`` and a multiple of ``k``
    (windows must start on a k-mer boundary to tokenise like the whole sequence)."""
    if not isinstance(stride, int | np.integer) or isinstance(stride, bool):
        raise TypeError(f"stride must be an integer number of bases, got {type(stride).__name__}")
    if stride < 1 or stride > window:
        raise ValueError(f"stride must be between 1 and the window ({window:,} bases), got {stride:,}")
    if stride % k:
        raise ValueError(
            f"stride must be a multiple of {k} bases, got {stride:,}: every window starts on a "
            f"{k}-mer boundary of the sequence so that it tokenises its bases exactly as the whole "
            "sequence does"
        )


def _check_window(window: int | None, capacity: int, k: int) -> int:
    """The window in tokens (``window`` is in bases; None: the capacity)."""
    if capacity < 1:
        raise ValueError("the prefix leaves no room for DNA in the model's context")
    if window is None:
        return capacity
    if not isinstance(window, int | np.integer) or isinstance(window, bool):
        raise TypeError(f"window must be an integer number of bases, got {type(window).__name__}")
    if window < k or window % k or window // k > capacity:
        raise ValueError(
            f"window must be a multiple of {k} bases between {k} and {capacity * k:,} "
            f"(the model's context less prefix and <dna>), got {window:,}"
        )
    return int(window) // k


def plan_windows(n_bases: int, *, k: int, window_tokens: int, stride_tokens: int) -> list[Window]:
    """The windows of a sequence of ``n_bases`` (see the module docstring for the rule)."""
    if window_tokens < 1 or not 1 <= stride_tokens <= window_tokens:
        raise ValueError(f"need 1 <= stride ({stride_tokens}) <= window ({window_tokens}) tokens")
    n_tokens = -(-n_bases // k)
    if n_tokens <= window_tokens:
        return [Window(0, n_bases, 0, n_bases)]
    count = 1 + math.ceil((n_tokens - window_tokens) / stride_tokens)
    out = []
    for j in range(count):
        start = j * stride_tokens
        end = min(start + window_tokens, n_tokens)
        keep = 0 if j == 0 else (j - 1) * stride_tokens + window_tokens
        out.append(Window(start * k, min(end * k, n_bases), keep * k, min(end * k, n_bases)))
    return out


def scored_bases(sequence: str, k: int) -> np.ndarray:
    """Which bases the model scores: those whose k-mer chunk (cut from the start of ``sequence``)
    holds only A/C/G/T, either case; the others are in ``<oov>`` chunks."""
    raw = np.frombuffer(sequence.upper().encode("ascii", "replace"), dtype=np.uint8)
    ok = np.isin(raw, np.frombuffer(b"ACGT", dtype=np.uint8))
    pad = -len(ok) % k
    chunks = np.concatenate([ok, np.ones(pad, dtype=bool)]).reshape(-1, k).all(axis=1)
    return np.repeat(chunks, k)[: len(ok)]


def _plan(model: _Scorer, content: str, stride: int, window: int | None, prefix: str) -> list[Window]:
    k = model.layout.k
    w_tokens = _check_window(window, window_capacity(model, prefix), k)
    check_stride(stride, w_tokens * k, k)
    return plan_windows(len(content), k=k, window_tokens=w_tokens, stride_tokens=stride // k)


def _named(index: int, win: Window, exc: Exception) -> ValueError:
    reason = str(exc).removeprefix("sequence 0: ")
    return ValueError(f"sequence {index} (bases {win.start + 1}-{win.end}): {reason}")


def strided_base_logprobs(
    model: _Scorer,
    sequence: str,
    *,
    stride: int,
    window: int | None = None,
    method: Literal["fns", "exact"] = "fns",
    prefix: str = "",
) -> np.ndarray:
    """``model.base_logprobs(sequence)`` for a sequence of any length: ``(L, 4)`` float32, columns
    A, C, G, T, each row from the window where that base has the most left context."""
    if not isinstance(sequence, str):
        raise TypeError(f"sequence 0 is a {type(sequence).__name__}, expected str")
    content = sequence.strip()
    wins = _plan(model, content, stride, window, prefix)
    if len(wins) == 1:
        return model.base_logprobs(sequence, method=method, prefix=prefix)
    out = np.empty((len(content), 4), dtype=np.float32)
    for win in wins:
        try:
            lp = model.base_logprobs(content[win.start : win.end], method=method, prefix=prefix)
        except ValueError as exc:
            raise _named(0, win, exc) from None
        out[win.keep_start : win.keep_end] = lp[win.keep_start - win.start : win.keep_end - win.start]
    return out


def strided_score(
    model: _Scorer,
    sequences: str | Sequence[str],
    *,
    stride: int,
    window: int | None = None,
    level: Literal["bp", "token"] = "bp",
    method: Literal["fns", "exact"] = "fns",
    prefix: str = "",
    token_budget: int = 16384,
) -> Any:
    """``model.score(sequences, ...)`` for sequences of any length (a ``ScoreResult`` or a list).

    When every sequence fits one window this *is* ``model.score(sequences, ...)``. Otherwise each
    long sequence is cut into windows, all windows are scored in one batched call, and the
    per-base (bp level) or per-6-mer (token level) values are stitched by the window rule; the
    mean, ``n_scored`` and ``n_oov_bases`` are recomputed from the stitched values.
    """
    single = isinstance(sequences, str)
    items = [sequences] if single else list(sequences)
    options: dict[str, Any] = {
        "level": level,
        "method": method,
        "prefix": prefix,
        "token_budget": token_budget,
    }
    plans = []
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise TypeError(f"sequence {i} is a {type(s).__name__}, expected str")
        plans.append(_plan(model, s.strip(), stride, window, prefix))
    if all(len(p) == 1 for p in plans):
        return model.score(sequences, **options)
    texts: list[str] = []
    owners: list[tuple[int, Window]] = []
    for i, (s, wins) in enumerate(zip(items, plans, strict=True)):
        content = s.strip()
        for win in wins:
            texts.append(s if len(wins) == 1 else content[win.start : win.end])
            owners.append((i, win))
    for text, (i, win) in zip(texts, owners, strict=True):
        try:
            model.check_sequence(text, prefix=prefix)  # a bad character, named by sequence and bases
        except ValueError as exc:
            raise _named(i, win, exc) from None
    with warnings.catch_warnings(record=True):  # the windows' own warnings name windows
        warnings.simplefilter("always")
        parts = model.score(texts, **options)
    k = model.layout.k
    results = [
        _stitch(k, s.strip(), [p for p, (j, _) in zip(parts, owners, strict=True) if j == i], plans[i], level)
        for i, s in enumerate(items)
    ]
    warn_unscored(results, stacklevel=3)  # unscored or failed sequences, said by sequence
    return results[0] if single else results


def _stitch(k: int, content: str, parts: list[Any], wins: list[Window], level: str) -> Any:
    """One result from its windows' results (the same class, built without importing it)."""
    if len(parts) == 1:
        return parts[0]
    n_oov = int((~scored_bases(content, k)).sum())
    result_type = type(parts[0])
    if level == "bp":
        values = np.full(len(content), np.nan, dtype=np.float32)
        for part, win in zip(parts, wins, strict=True):
            values[win.keep_start : win.keep_end] = part.per_base[
                win.keep_start - win.start : win.keep_end - win.start
            ]
    else:
        values = np.full(-(-len(content) // k), np.nan, dtype=np.float32)
        for part, win in zip(parts, wins, strict=True):
            a, b = win.keep_start // k, -(-win.keep_end // k)
            values[a:b] = part.per_token[a - win.start // k : b - win.start // k]
    finite = ~np.isnan(values)
    n = int(finite.sum())
    mean = float(values[finite].astype(np.float64).mean()) if n else float("nan")
    key = "per_base" if level == "bp" else "per_token"
    failed = next((p for p in parts if p.status == "failed"), None)
    if failed is not None:  # a window's NaN is no unscored base: the whole sequence failed
        return result_type(
            mean=float("nan"),
            n_scored=n,
            n_oov_bases=n_oov,
            status="failed",
            reason=failed.reason,
            **{key: values},
        )
    return result_type(mean=mean, n_scored=n, n_oov_bases=n_oov, **{key: values})
