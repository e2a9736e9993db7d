"""Embeddings of a model served by hexamer: whole sequences sent to its ``/v1/embeddings`` with the
options of :func:`hexamer.embed.embed_sequences`, which the server runs on them (the same chunking
and pooling as a local model), in requests split to the server's limits.

The server announces its model's hidden size and layers and its limits in ``/v1/models``
(:class:`~hexamer.remote.protocol.HexamerFacts`). A sequence longer than its ``max_bp`` cannot be
sent and gets that reason; a request it fails with HTTP 500 (a NaN/inf model output) is sent again
one sequence at a time, so only the sequences it fails have no vector. vLLM and SGLang answer
``/v1/embeddings`` with their own pooling (their pooler over the whole prompt, normalised by
default), not hexamer's mean / last / ``</dna>`` state of one layer, so they are refused by name.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from hexamer.backend.embedding_options import EmbeddingOptions
from hexamer.backend.protocol import UnsupportedOperation
from hexamer.model.finite import non_finite_output
from hexamer.remote.errors import MalformedResponse, RemoteError
from hexamer.remote.http import Connection
from hexamer.remote.protocol import HexamerFacts

__all__ = ["PATH", "embedding_facts", "request_batches", "served_embeddings", "served_text"]

PATH = "/v1/embeddings"
#: body bytes kept for the JSON around the sequences (model name, options, quotes and commas)
_BODY_RESERVE = 4096
_NOT_ACGT = re.compile(r"[^ACGTacgt]")


def embedding_facts(facts: HexamerFacts | None, server_kind: str, url: str) -> HexamerFacts:
    """The served model's embedding facts, or :class:`UnsupportedOperation` saying why this server
    cannot give hexamer's embeddings."""
    if server_kind != "hexamer":
        raise UnsupportedOperation(
            f"{url} is a {server_kind} server, whose /v1/embeddings pools its own way (its pooler over "
            "the whole prompt, normalised by default), not hexamer's mean / last / </dna> state of one "
            "layer: its numbers would differ from Carbon.embed's; serve the model with hexamer serve, "
            "or load it here (Carbon.from_pretrained)"
        )
    if facts is None:
        raise UnsupportedOperation(
            f"{url}/v1/models does not give its model's layers and limits (a hexamer server older than "
            "this client): update the server to embed through it, or load the model here"
        )
    return facts


def served_text(sequence: str) -> str:
    """``sequence`` (normalised DNA text) as the server takes it, tokenised to the same ids: a
    character the 6-mer codec cannot read (not A, C, G or T in either case) sends its 6-mer to
    ``<oov>`` whatever it is, so it travels as ``N``, which the server accepts and reads the same
    way (non-ASCII text is upper-cased first, as :func:`hexamer.tokenizer.dna.encode_dna` does)."""
    if not sequence.isascii():
        sequence = sequence.upper().encode("ascii", errors="replace").decode("ascii")
    return _NOT_ACGT.sub("N", sequence)


def request_batches(lengths: Sequence[int], facts: HexamerFacts, batch_size: int) -> list[list[int]]:
    """Indices of the sequences of each request, in order: at most ``batch_size`` (and the
    server's ``max_prompts``) sequences and a body within its ``max_body_bytes``. A sequence over
    the server's ``max_bp``, or too large for any body, is in no batch."""
    per_request = min(batch_size, facts.max_prompts)
    room = facts.max_body_bytes - _BODY_RESERVE
    batches: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, n in enumerate(lengths):
        if n > facts.max_bp or n + 3 > room:
            continue
        if current and (len(current) == per_request or size + n + 3 > room):
            batches.append(current)
            current, size = [], 0
        current.append(i)
        size += n + 3  # quotes and a comma
    if current:
        batches.append(current)
    return batches


def _too_large(n: int, facts: HexamerFacts) -> str:
    if n > facts.max_bp:
        return (
            f"{n:,} bases exceed the server's limit of {facts.max_bp:,} per sequence (hexamer serve --max-bp)"
        )
    return f"{n:,} bases exceed the server's request size of {facts.max_body_bytes:,} bytes (hexamer serve --max-body-bytes)"


def _vectors(url: str, answer: Any, n: int, hidden: int) -> list[np.ndarray]:
    """The float32 vectors of an answer to ``n`` sequences, in input order."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != n:
        raise MalformedResponse(f"{url}: malformed response: expected {n} embeddings in 'data'", url=url)
    out: list[np.ndarray | None] = [None] * n
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        text = item.get("embedding") if isinstance(item, dict) else None
        try:
            vector = np.frombuffer(base64.b64decode(str(text), validate=True), dtype="<f4")
        except (binascii.Error, ValueError):
            vector = np.empty(0, dtype="<f4")
        if (
            not isinstance(index, int)
            or not 0 <= index < n
            or out[index] is not None
            or len(vector) != hidden
        ):
            raise MalformedResponse(
                f"{url}: malformed response: an embedding that is not one of {n} base64 vectors of "
                f"{hidden} float32",
                url=url,
            )
        out[index] = vector.astype(np.float32)
    return out  # type: ignore[return-value]


def _failed(exc: RemoteError) -> str:
    """The reason of a sequence the server failed: a NaN/inf output's own reason (what a local model
    gives for it), else the server's message."""
    what = non_finite_output("embedding")
    return what if what in str(exc) else f"the server failed it: {exc}"


async def _embed(
    conn: Connection, model: str, texts: list[str], options: EmbeddingOptions, hidden: int
) -> list[np.ndarray | str]:
    body = {
        "model": model,
        "input": texts,
        "encoding_format": "base64",
        "pool": options.pool,
        "layer": options.layer,
        "prefix": options.prefix,
        "max_tokens": options.max_tokens,
        "chunk_overlap": options.chunk_overlap,
    }
    try:
        answer = await conn.post(PATH, body)
    except RemoteError as exc:
        if exc.status != 500:  # unreachable, refused, malformed: the whole call fails
            raise
        if len(texts) == 1:
            return [_failed(exc)]
        # one of them spoiled the request: each alone, so only the sequences it fails lose their vector
        alone = await asyncio.gather(*(_embed(conn, model, [t], options, hidden) for t in texts))
        return [r for (r,) in alone]
    return list(_vectors(conn.url(PATH), answer, len(texts), hidden))


def served_embeddings(
    conn: Connection, model: str, facts: HexamerFacts, sequences: Sequence[str], options: EmbeddingOptions
) -> list[np.ndarray | str]:
    """Per sequence, its vector or the reason it has none (see the module); the requests run
    concurrently (the connection's in-flight bound)."""
    texts = [served_text(s) for s in sequences]
    batches = request_batches([len(t) for t in texts], facts, options.batch_size)
    jobs = [_embed(conn, model, [texts[i] for i in batch], options, facts.hidden_size) for batch in batches]
    got: dict[int, np.ndarray | str] = {}
    for batch, results in zip(batches, conn.run_all(jobs), strict=True):
        got.update(zip(batch, results, strict=True))
    return [got[i] if i in got else _too_large(len(t), facts) for i, t in enumerate(texts)]
