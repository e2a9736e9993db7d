"""Log-probabilities in the completions API's shapes: OpenAI's legacy ``logprobs`` object and vLLM's
``prompt_logprobs`` list (written as JSON text directly and lazily, a piece at a time: a top-4096
answer holds millions of entries)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from typing import Any

import numpy as np

from hexamer.engine.request import TokenLogprobs
from hexamer.server.streaming import JsonPieces, RawJSON, dumps, json_number

__all__ = [
    "LOGPROB_FLOOR",
    "floor_logprob",
    "legacy_logprobs",
    "legacy_logprobs_json",
    "prompt_logprobs_json",
]

LOGPROB_FLOOR = -9999.0  # what OpenAI and vLLM send instead of -inf


def floor_logprob(x: float) -> float:
    """``x``, or :data:`LOGPROB_FLOOR` for anything lower (JSON has no -inf; a NaN stays NaN and is
    written ``null``)."""
    return max(float(x), LOGPROB_FLOOR)


def _floored_texts(values: np.ndarray) -> list[str]:
    """``values`` floored (:func:`floor_logprob`, vectorised) as JSON numbers; ``null`` for a NaN
    (checked once per row: the per-value test runs only for a row that has one)."""
    floored = np.maximum(values, LOGPROB_FLOOR)
    if bool(np.isfinite(floored).all()):
        return list(map(repr, floored.tolist()))
    return [json_number(v) for v in floored.tolist()]


def _top_entry(
    token: str, lp: TokenLogprobs, r: int, top_n: int, token_text: Callable[[int], str]
) -> dict[str, float]:
    """One token's ``top_logprobs`` entry: the token itself first, then the ``top_n`` best (by
    text: a text already present keeps its first value)."""
    entry: dict[str, float] = {token: floor_logprob(lp.logprob[r])}
    texts = [token_text(t) for t in lp.top_ids[r].tolist()]
    values = np.maximum(lp.top_logprobs[r], LOGPROB_FLOOR).tolist()  # floor_logprob, vectorised
    for text, value in zip(texts, values, strict=True):
        if len(entry) > top_n:
            break
        entry.setdefault(text, value)
    return entry


#: a token text as a JSON string (the texts of a vocabulary repeat in every entry)
_json_key = lru_cache(maxsize=1 << 18)(partial(json.dumps, ensure_ascii=False))


def _entry_json(entry: dict[str, float]) -> str:
    """``entry`` as compact JSON, written as text: ``json.dumps`` of a dict makes a tuple per item,
    and millions of them set off full garbage collections that stall every thread."""
    if not all(map(math.isfinite, entry.values())):  # a NaN: null, as everywhere else
        return dumps(entry)
    return "{" + ",".join([f"{_json_key(k)}:{v!r}" for k, v in entry.items()]) + "}"


def _legacy_head(
    token_ids: list[int],
    rows: list[tuple[TokenLogprobs, int] | None],
    offset: int,
    token_text: Callable[[int], str],
) -> tuple[list[str], dict[str, Any]]:
    """The tokens and the three per-token lists of the legacy object (all but ``top_logprobs``)."""
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    offsets: list[int] = []
    for tid, row in zip(token_ids, rows, strict=True):
        token = token_text(tid)
        offsets.append(offset)
        offset += len(token)
        tokens.append(token)
        token_logprobs.append(None if row is None else floor_logprob(row[0].logprob[row[1]]))
    return tokens, {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens}


def legacy_logprobs(
    token_ids: list[int],
    rows: list[tuple[TokenLogprobs, int] | None],
    offset: int,
    *,
    top_n: int,
    token_text: Callable[[int], str],
) -> dict[str, Any]:
    """OpenAI's legacy ``logprobs`` object (vLLM: the token itself first, then the ``top_n`` best);
    ``rows[i]`` is ``(logprobs, row)`` of token ``i`` or None where there is none, ``token_text``
    names a token id, ``offset`` is the text offset of the first token."""
    tokens, head = _legacy_head(token_ids, rows, offset, token_text)
    head["top_logprobs"] = [
        None if row is None else _top_entry(token, row[0], row[1], top_n, token_text)
        for token, row in zip(tokens, rows, strict=True)
    ]
    return head


def legacy_logprobs_json(
    token_ids: list[int],
    rows: list[tuple[TokenLogprobs, int] | None],
    offset: int,
    *,
    top_n: int,
    token_text: Callable[[int], str],
) -> JsonPieces:
    """:func:`legacy_logprobs` written lazily, one token's ``top_logprobs`` entry at a time (a
    top-4096 answer of 64 tokens x 8 choices holds two million entries)."""

    def write() -> Iterator[str]:
        tokens, head = _legacy_head(token_ids, rows, offset, token_text)
        yield dumps(head)[:-1] + ',"top_logprobs":['
        for i, (token, row) in enumerate(zip(tokens, rows, strict=True)):
            entry = (
                "null" if row is None else _entry_json(_top_entry(token, row[0], row[1], top_n, token_text))
            )
            yield entry if i == 0 else "," + entry
        yield "]}"

    return JsonPieces(write)


def prompt_logprobs_json(lp: TokenLogprobs | None, json_of: Callable[[int], str]) -> RawJSON | JsonPieces:
    """vLLM's ``prompt_logprobs`` of one prompt,
    ``[null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...]``, written directly and lazily,
    one position at a time (a top-4096 answer holds millions of entries; dict-building would
    dominate the request, and the whole text would take hundreds of megabytes); ``json_of`` gives
    a token id's text as a JSON string."""
    if lp is None:
        return RawJSON("null")

    def write() -> Iterator[str]:
        yield "[null"
        for i in range(len(lp)):
            tid = int(lp.token_ids[i])
            items = [
                f'"{tid}":{{"logprob":{json_number(floor_logprob(lp.logprob[i]))},"rank":{int(lp.rank[i])},"decoded_token":{json_of(tid)}}}'
            ]
            tops = lp.top_ids[i].tolist()
            top_lps = _floored_texts(lp.top_logprobs[i])
            items += [
                f'"{t}":{{"logprob":{v},"rank":{rank},"decoded_token":{json_of(t)}}}'
                for rank, (t, v) in enumerate(zip(tops, top_lps, strict=True), start=1)
                if t != tid
            ]
            yield ",{" + ",".join(items) + "}"
        yield "]"

    return JsonPieces(write)
