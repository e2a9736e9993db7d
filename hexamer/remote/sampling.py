"""Generation on a served model: where each 6-mer is drawn, and the two samplers.

* **client** (bp mode always; token mode with a mask, a partial last 6-mer, a client-only option,
  or on SGLang): one request per 6-mer; the server returns the next token's top-N distribution and
  hexamer picks the 6-mer with the local engine's sampler (same seeds, masks and exact lengths as
  a local model). Exact, but one round trip and one prompt pass per 6-mer.
* **server** (plain token mode on vLLM / hexamer): one request per prompt, restricted to the DNA
  block with ``allowed_token_ids``; the server's own sampler and seeds.

:func:`server_sampler_problem` says why the server path cannot take a batch (``None``: it can);
:class:`~hexamer.remote.backend.RemoteBackend` picks the path and runs the requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from hexamer.engine import Request
from hexamer.engine.request import RequestState
from hexamer.engine.sampler import END, sample_next
from hexamer.remote.errors import RemoteError
from hexamer.remote.http import Connection
from hexamer.remote.marginals import kmer_rows
from hexamer.remote.protocol import SglangFormat, VllmFormat
from hexamer.tokenizer import DnaLayout

__all__ = [
    "client_generate",
    "client_only_options",
    "failing_on_500",
    "server_generate",
    "server_sampler_problem",
]


def client_only_options(request: Request) -> list[str]:
    """The options of ``request`` that only the client sampler applies with the local engine's
    definitions (what ``sampler="server"`` refuses): ``top_k``, ``min_p``, ``logprobs``."""
    p = request.params
    named = (("top_k", p.top_k != 0), ("min_p", p.min_p != 0.0), ("logprobs", bool(p.return_logprobs)))
    return [name for name, is_set in named if is_set]


def server_sampler_problem(
    fmt: VllmFormat | SglangFormat, server_kind: str, requests: Sequence[Request]
) -> str | None:
    """Why ``sampler="server"`` cannot serve these requests, or ``None`` when it can: the server's
    sampler draws whole 6-mers of plain token mode from a prompt of whole 6-mers (vLLM or hexamer
    servers), and defines the client-only options its own way."""
    for req in requests:
        p = req.params
        mask = p.mask is not None
        if not (fmt.server_generation and p.mode == "token" and not mask):
            return (
                "sampler='server' needs mode='token', no mask and a vLLM or hexamer server "
                f"(this is {server_kind} with mode={p.mode!r}{', a mask' if mask else ''})"
            )
    if any(req.forced for req in requests):
        return "sampler='server' needs prompts ending on a 6-mer boundary (the server samples whole 6-mers)"
    client_only = sorted({name for req in requests for name in client_only_options(req)}, key=_ORDER.index)
    if client_only:
        return (
            f"sampler='server' does not take {', '.join(client_only)}: the server's sampler defines "
            "them differently; use sampler='client' (or 'auto'), which applies them as a local model does"
        )
    return None


_ORDER = ["top_k", "min_p", "logprobs"]


async def client_generate(
    connection: Connection, fmt: VllmFormat | SglangFormat, layout: DnaLayout, top_n: int, req: Request
) -> Request:
    """Fill ``req`` one 6-mer per request: the server's top-N next-token log-probabilities, the
    local engine's sampler."""
    ids = list(req.prompt_ids)
    extra = (layout.end_id, layout.oov_id)
    while req.state is not RequestState.FINISHED:
        top = await fmt.next_top(connection, ids, top_n)
        logits, _ = kmer_rows([top], layout, top_n, extra=extra)
        (pick,) = sample_next(logits, [req], layout.k)
        if pick == END:
            req.ended_with_tag = True
            req.finish("end_tag")
        else:
            req.append(pick)
            ids.append(layout.kmer_start + pick)
    return req


async def server_generate(
    connection: Connection, fmt: VllmFormat, layout: DnaLayout, req: Request
) -> Request:
    """Fill ``req`` with one request on the server's own sampler, limited to the DNA block."""
    p = req.params
    allowed = list(range(layout.kmer_start, layout.kmer_stop))
    stop = [layout.end_id] if p.stop_at_end_tag else []
    new, _ = await fmt.generate(
        connection,
        req.prompt_ids,
        n_tokens=req.n_tokens,
        temperature=p.temperature,
        top_p=p.top_p,
        seed=p.seed,
        allowed=allowed + stop,
        stop=stop,
    )
    url = connection.url(fmt.path)
    for tid in new:
        if req.state is RequestState.FINISHED:
            break
        if tid == layout.end_id and p.stop_at_end_tag:
            req.ended_with_tag = True
            req.finish("end_tag")
        elif layout.kmer_start <= tid < layout.kmer_stop:
            req.append(tid - layout.kmer_start)
        else:
            raise RemoteError(
                f"{url} generated token {tid}, outside the DNA block despite allowed_token_ids", url=url
            )
    if req.state is not RequestState.FINISHED:
        raise RemoteError(f"{url} returned {len(new)} tokens, {req.n_tokens} were asked", url=url)
    return req


async def failing_on_500(run: Callable[[Request], Awaitable[Request]], request: Request) -> Request:
    """``run(request)``, the request failed (``finish_reason`` ``"error"``) when the server answers
    it HTTP 500 (hexamer's server does so for a NaN/inf model output): the other prompts go on."""
    try:
        return await run(request)
    except RemoteError as exc:
        if exc.status != 500:
            raise
        request.fail(f"the server failed it: {exc}")
        return request
