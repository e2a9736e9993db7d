"""How large an answer may get, counted from the request before any work starts.

A response's size grows with the numbers it carries: top-N log-probabilities of every returned
token (``logprobs``), of every prompt token (``prompt_logprobs``, repeated in each choice), and
per-base or per-token scores (``/v1/dna/score`` with ``per_position``). Their count is known from
the request alone, so a request whose answer would hold more than ``max_response_values`` of them
is refused (400) with the terms of the count and what to lower, instead of tying up the server for
seconds and hundreds of megabytes (docs/server.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hexamer.server.errors import ApiError

__all__ = ["ResponseTerm", "check_response_values", "completion_terms", "score_terms"]


@dataclass(frozen=True)
class ResponseTerm:
    """``count`` numbers of the answer, the request field that drives them and how they arise."""

    param: str
    count: int
    how: str


def completion_terms(
    prompt_lens: Sequence[int],
    *,
    n: int,
    max_tokens: int,
    logprobs: int | None,
    prompt_logprobs: int | None,
    echo: bool,
) -> list[ResponseTerm]:
    """The log-probabilities of a ``/v1/completions`` answer: per choice (``n`` per prompt), each
    returned token with ``logprobs`` carries its own and the top N (``N + 1``; the prompt's tokens
    too with ``echo``), and each prompt token after the first carries ``prompt_logprobs + 1`` (the
    prompt's list is repeated in every choice; ``echo`` with ``logprobs`` fills it too)."""
    terms = []
    if logprobs is not None:
        per_choice = [max_tokens + (length if echo else 0) for length in prompt_lens]
        count = n * sum(per_choice) * (logprobs + 1)
        terms.append(
            ResponseTerm(
                "logprobs",
                count,
                f"{n * len(prompt_lens)} choice(s) x up to {max(per_choice):,} tokens x "
                f"{logprobs + 1:,} (logprobs {logprobs} + the token itself)",
            )
        )
    top = prompt_logprobs if prompt_logprobs is not None else (logprobs if echo else None)
    if top is not None:
        positions = sum(max(length - 1, 0) for length in prompt_lens)
        name = "prompt_logprobs" if prompt_logprobs is not None else "logprobs"
        terms.append(
            ResponseTerm(
                name,
                n * positions * (top + 1),
                f"{n} choice(s) per prompt x {positions:,} prompt positions x {top + 1:,} "
                f"({name} {top} + the prompt token)",
            )
        )
    return terms


def score_terms(lengths: Sequence[int], *, level: str, k: int, per_position: bool) -> list[ResponseTerm]:
    """The per-position scores of a ``/v1/dna/score`` answer: one per base (``level: bp``) or per
    6-mer (``token``) of every sequence, with ``per_position``; nothing otherwise."""
    if not per_position:
        return []
    per_seq = list(lengths) if level == "bp" else [-(-b // k) for b in lengths]
    unit = "bases" if level == "bp" else "tokens"
    return [
        ResponseTerm(
            "per_position", sum(per_seq), f"{len(per_seq)} sequence(s), {sum(per_seq):,} {unit} in all"
        )
    ]


def check_response_values(terms: Sequence[ResponseTerm], limit: int, hint: str) -> None:
    """400 when the ``terms`` add up to more than ``limit`` (``max_response_values``), naming the
    largest term's field, the count and ``hint`` (what to lower)."""
    total = sum(t.count for t in terms)
    if total <= limit:
        return
    top = max(terms, key=lambda t: t.count)
    detail = "; ".join(f"{t.param}: {t.count:,} = {t.how}" for t in terms if t.count)
    raise ApiError(
        400,
        f"{top.param}: the response would hold {total:,} values ({detail}), more than the server's "
        f"max_response_values of {limit:,}; {hint}, or start the server with a larger "
        "--max-response-values",
        top.param,
    )
