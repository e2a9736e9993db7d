"""Log-probabilities in the completions API's shapes: OpenAI's legacy ``logprobs`` object and vLLM's
``prompt_logprobs`` list (written as JSON text directly: a top-4096 answer holds millions of
entries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hexamer.engine.request import TokenLogprobs
from hexamer.server.streaming import RawJSON

__all__ = ["LOGPROB_FLOOR", "floor_logprob", "legacy_logprobs", "prompt_logprobs_json"]

LOGPROB_FLOOR = -9999.0  # what OpenAI and vLLM send instead of -inf


def floor_logprob(x: float) -> float:
    """``x``, or :data:`LOGPROB_FLOOR` for anything lower (JSON has no -inf)."""
    return max(float(x), LOGPROB_FLOOR)


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
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    for tid, row in zip(token_ids, rows, strict=True):
        token = token_text(tid)
        offsets.append(offset)
        offset += len(token)
        tokens.append(token)
        if row is None:
            token_logprobs.append(None)
            tops.append(None)
            continue
        lp, r = row
        token_logprobs.append(floor_logprob(lp.logprob[r]))
        entry: dict[str, float] = {token: floor_logprob(lp.logprob[r])}
        for t, v in zip(lp.top_ids[r].tolist(), lp.top_logprobs[r].tolist(), strict=True):
            if len(entry) > top_n:
                break
            entry.setdefault(token_text(t), floor_logprob(v))
        tops.append(entry)
    return {
        "text_offset": offsets,
        "token_logprobs": token_logprobs,
        "tokens": tokens,
        "top_logprobs": tops,
    }


def prompt_logprobs_json(lp: TokenLogprobs | None, json_of: Callable[[int], str]) -> RawJSON:
    """vLLM's ``prompt_logprobs`` of one prompt,
    ``[null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...]``, written directly (a
    top-4096 answer holds millions of entries; dict-building would dominate the request);
    ``json_of`` gives a token id's text as a JSON string."""
    if lp is None:
        return RawJSON("null")
    parts = ["[null"]
    tops = lp.top_ids.tolist()
    top_lps = lp.top_logprobs.tolist()
    for i in range(len(lp)):
        tid = int(lp.token_ids[i])
        items = [
            f'"{tid}":{{"logprob":{floor_logprob(lp.logprob[i])!r},"rank":{int(lp.rank[i])},"decoded_token":{json_of(tid)}}}'
        ]
        for rank, (t, v) in enumerate(zip(tops[i], top_lps[i], strict=True), start=1):
            if t != tid:
                items.append(
                    f'"{t}":{{"logprob":{floor_logprob(v)!r},"rank":{rank},"decoded_token":{json_of(t)}}}'
                )
        parts.append("{" + ",".join(items) + "}")
    return RawJSON(",".join(parts) + "]")
