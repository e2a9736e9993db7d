"""What the DNA endpoints share: the IUPAC check, list and tag fields, and running a job on the
engine thread with the request's deadline (:mod:`hexamer.server.dna` and
:mod:`hexamer.server.dna_generate`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from starlette.requests import Request as HttpRequest

from hexamer.server.errors import ApiError
from hexamer.server.state import ServerState
from hexamer.server.worker import ShuttingDown, TimedOut
from hexamer.tokenizer.tags import check_prefix
from hexamer.tokenizer.tags import tag_prefix as library_tag_prefix

__all__ = ["OFFLOAD_CHARS", "as_list", "dna_problem", "engine_job", "tag_prefix"]

T = TypeVar("T")
_NOT_IUPAC = re.compile(r"[^ACGTURYSWKMBDHVNacgturyswkmbdhvn\s]")
#: request work above this size (characters) is done on the preparation threads
OFFLOAD_CHARS = 4096


def dna_problem(seq: str) -> str | None:
    """Why ``seq`` is not DNA (IUPAC nucleotide codes), or None (one regex scan: megabases in
    milliseconds)."""
    bad = _NOT_IUPAC.search(seq)
    if bad is not None:
        return f"character {bad.start() + 1} is {bad.group()!r}, not a nucleotide code (A C G T or IUPAC N R Y ...)"
    return None


def as_list(value: str | list[str], field: str, limit: int) -> list[str]:
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ApiError(400, f"{field}: give at least one", field)
    if len(items) > limit:
        raise ApiError(400, f"{field}: {len(items)} items exceed the limit of {limit}", field)
    return items


def tag_prefix(tags: list[str] | None, prefix: str) -> str:
    """``<tag>...`` + ``prefix`` before ``<dna>``, by the library's rule
    (:func:`hexamer.tokenizer.tags.tag_prefix`: tags are names, a prefix is tags only); a 400
    naming the field otherwise."""
    try:
        names = library_tag_prefix(tags, "")
    except ValueError as exc:
        raise ApiError(400, str(exc), "tags") from None
    try:
        return names + check_prefix(prefix)
    except ValueError as exc:
        raise ApiError(400, str(exc), "prefix") from None


async def engine_job(state: ServerState, http: HttpRequest, fn: Callable[[], T]) -> T:
    """Run on the engine thread; a ValueError/TypeError from the library is the client's (400),
    and the request's timeout (counted from its arrival) is a 504."""
    deadline = state.deadline(http.scope)
    state.check_deadline(deadline)
    try:
        return await state.worker.run_job(fn, deadline)
    except ShuttingDown as exc:
        raise ApiError(503, str(exc)) from None
    except TimedOut:
        raise ApiError(504, state.timeout_message) from None
    except (ValueError, TypeError) as exc:
        raise ApiError(400, str(exc)) from None
