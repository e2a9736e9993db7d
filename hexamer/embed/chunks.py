"""How a sequence longer than the model's context is cut into overlapping chunks.

Chunks hold ``capacity`` content tokens, start on 6-mer boundaries of the original sequence (so
every chunk tokenizes exactly like that stretch of the whole sequence) and overlap by
``overlap`` tokens that serve as left context only. Each content token is *owned* by exactly one
chunk: the first chunk owns all its tokens, a later one the tokens after the previous chunk's end.
The last chunk is right-aligned (it ends with the sequence and is full-length when the sequence
allows), so the final tokens and the ``</dna>`` separator see as much context as possible.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Chunk", "chunk_plan"]


class Chunk(NamedTuple):
    """Content tokens ``[start, end)`` are fed; ``[own, end)`` are pooled from this chunk."""

    start: int
    end: int
    own: int


def chunk_plan(n_tokens: int, capacity: int, overlap: int = 0) -> list[Chunk]:
    """Chunks covering ``n_tokens`` content tokens, at most ``capacity`` each.

    >>> chunk_plan(10, 4, 1)
    [Chunk(start=0, end=4, own=0), Chunk(start=3, end=7, own=4), Chunk(start=6, end=10, own=7)]
    """
    if capacity < 1:
        raise ValueError(f"chunk capacity must be >= 1 token, got {capacity}")
    if not 0 <= overlap < capacity:
        raise ValueError(f"chunk overlap must be in [0, {capacity}) tokens, got {overlap}")
    if n_tokens <= capacity:
        return [Chunk(0, n_tokens, 0)]
    plan = [Chunk(0, capacity, 0)]
    own = capacity
    while own < n_tokens:
        start = min(own - overlap, n_tokens - capacity)
        plan.append(Chunk(start, start + capacity, own))
        own = start + capacity
    return plan
