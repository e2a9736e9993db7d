"""Sequence embeddings from the hidden states of ``<dna>…</dna>``.

Each sequence is fed as ``prefix<dna>SEQ</dna>`` and one hidden layer is pooled:

* ``mean``: the mean over the content tokens (every token between the tags: the 6-mers, the
  A-padded tail and any ``<oov>`` chunk). Content-token states carry local sequence state (strand,
  codon phase).
* ``last``: the state of the last content token.
* ``sep``: the state of the ``</dna>`` separator, which carries genome/taxonomy-level signal.

``layer`` indexes Hugging Face's ``hidden_states`` convention: 0 is the embedding output, i the
input of layer i, and ``-1`` (= ``num_layers``) the final normed state; negative indices count
from the end.

Sequences longer than the context are chunked (:mod:`hexamer.embed.chunks`): ``mean`` is then the
mean over all content tokens, each taken from the chunk that owns it (equivalently the
token-count-weighted mean of the chunks' means), and ``last``/``sep`` come from the last chunk,
which is right-aligned so that it ends with the sequence and carries a full context.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np
import torch

from hexamer.backend.embedding_options import EmbeddingOptions
from hexamer.backend.protocol import EmbeddingBackend, Frontend, ServedEmbeddingBackend, UnsupportedOperation
from hexamer.embed.chunks import Chunk, chunk_plan
from hexamer.io import BadRecord, SequenceRecord, normalize_sequence
from hexamer.model.finite import non_finite_output
from hexamer.tokenizer.dna import encode_dna
from hexamer.tokenizer.tags import check_prefix

__all__ = ["GROUP_PROMPTS", "POOLS", "chunk_geometry", "embed_sequences", "embedding_backend", "prompt_count"]

Pool = Literal["mean", "last", "sep"]
POOLS: tuple[str, ...] = ("mean", "last", "sep")
RecordLike = SequenceRecord | BadRecord | tuple[str, str] | str


@dataclass
class _Job:
    """One record being embedded: its chunks' prompts and the running pooled sum."""

    id: str
    prompts: list[list[int]]
    chunks: list[Chunk]
    offset: int  # prompt index of the first content token
    total: np.ndarray | None = None
    count: int = 0
    error: str | None = None


@dataclass(frozen=True)
class _EmbedPlan:
    """How :func:`embed_sequences` cuts and pools records, checked once: the pooling, the hidden
    layer's index, the prefix's token ids, DNA tokens per chunk and their overlap, and the limits
    of one forward (prompts and padded tokens)."""

    pool: Pool
    layer: int
    prefix_ids: list[int]
    capacity: int
    overlap: int
    batch_size: int
    token_budget: int


def _as_record(item: RecordLike, index: int) -> SequenceRecord | BadRecord:
    if isinstance(item, (SequenceRecord, BadRecord)):
        return item
    if isinstance(item, str):
        return SequenceRecord(f"seq{index + 1}", item, index=index)
    if isinstance(item, tuple) and len(item) == 2:
        return SequenceRecord(str(item[0]), item[1], index=index)
    raise TypeError(f"record {index + 1}: expected a SequenceRecord, BadRecord, (id, sequence) or str")


def embedding_backend(carbon: Frontend) -> EmbeddingBackend:
    """``carbon.backend`` where it gives hidden states, else :class:`UnsupportedOperation`."""
    backend = carbon.backend
    if not backend.supports_embeddings:
        raise UnsupportedOperation(
            f"embeddings need the model's hidden states, which a {backend.kind} backend does not give; "
            "load the model locally (Carbon.from_pretrained)"
        )
    return cast(EmbeddingBackend, backend)


def _served_backend(carbon: Frontend) -> ServedEmbeddingBackend | None:
    """``carbon.backend`` where it embeds on the server that runs the model (by this module's
    code), None where the hidden states are pooled here."""
    backend = carbon.backend
    if backend.supports_served_embeddings and not backend.supports_embeddings:
        return cast(ServedEmbeddingBackend, backend)
    return None


def _layer_index(layer: int, n_layers: int) -> int:
    if not -(n_layers + 1) <= layer <= n_layers:
        raise ValueError(
            f"layer {layer} is out of range: the model has {n_layers} layers, so layer must be in "
            f"[{-(n_layers + 1)}, {n_layers}] (0 = embeddings, {n_layers} or -1 = final normed state)"
        )
    return layer % (n_layers + 1)


def embed_sequences(
    carbon: Frontend,
    records: Iterable[RecordLike],
    *,
    pool: Pool = "mean",
    layer: int = -1,
    max_tokens: int | None = None,
    chunk_overlap: int | None = None,
    prefix: str = "",
    batch_size: int = 8,
    token_budget: int = 16384,
    on_error: Callable[[str, str], None] | None = None,
) -> Iterator[tuple[str, np.ndarray | None]]:
    """Yield ``(id, vector)`` per record, in input order; ``vector`` is float32 ``(hidden,)``.

    ``carbon`` is a :class:`hexamer.Carbon` (any front end with a ``backend``); its backend must
    give hidden states (``supports_embeddings``), or embed on the server that runs the model with
    this same code (``supports_served_embeddings``: hexamer's server, the options sent along; the
    vectors equal a local model's), else :class:`UnsupportedOperation`.

    Records are :class:`~hexamer.io.SequenceRecord`/:class:`~hexamer.io.BadRecord` (as
    :func:`~hexamer.io.read_sequences` yields them), ``(id, sequence)`` pairs or plain strings. A
    bad record (reported by the reader, or empty), or one whose vector is not finite (the model's
    output was NaN or infinite: reason ``non-finite embedding: ...``), yields ``(id, None)`` and is
    passed to ``on_error(id, reason)``; the rest go on. ``max_tokens`` (default: the model's context) caps
    the tokens per forward, ``chunk_overlap`` (bp, rounded down to whole 6-mers; default a quarter
    of a chunk, at most 3,072 bp) is the left context shared by consecutive chunks of a long
    sequence. ``prefix`` (metadata tags) is put before ``<dna>``.
    """
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {', '.join(POOLS)}, got {pool!r}")
    served = _served_backend(carbon)
    n_layers = embedding_backend(carbon).num_layers if served is None else served.embedding_shape()[1]
    layer_i = _layer_index(layer, n_layers)
    prefix_ids, capacity, overlap = chunk_geometry(
        carbon, max_tokens=max_tokens, chunk_overlap=chunk_overlap, prefix=prefix
    )
    if batch_size < 1 or token_budget < 1:
        raise ValueError("batch_size and token_budget must be >= 1")
    if served is not None:  # the server cuts and pools with this module's code
        options = EmbeddingOptions(pool, layer_i, prefix, max_tokens, chunk_overlap, batch_size)
        return _embed_served(served, records, options, on_error)
    plan = _EmbedPlan(pool, layer_i, prefix_ids, capacity, overlap, batch_size, token_budget)
    return _embed(carbon, records, plan, on_error)


def chunk_geometry(
    carbon: Frontend, *, max_tokens: int | None = None, chunk_overlap: int | None = None, prefix: str = ""
) -> tuple[list[int], int, int]:
    """How :func:`embed_sequences` cuts sequences: the prefix's token ids, the DNA tokens per
    chunk and the overlap between chunks (tokens); arguments as for :func:`embed_sequences`."""
    backend = carbon.backend
    limit = backend.context_length if max_tokens is None else max_tokens
    if limit > backend.context_length:
        raise ValueError(f"max_tokens={limit} exceeds the model's context of {backend.context_length}")
    if chunk_overlap is not None and chunk_overlap < 0:
        raise ValueError(f"chunk_overlap must be >= 0 bp, got {chunk_overlap}")
    prefix_ids = backend.tokenizer.encode(check_prefix(prefix)) if prefix else []
    capacity = limit - len(prefix_ids) - 2
    k = backend.layout.k
    if capacity < 1:
        raise ValueError(f"max_tokens={limit} leaves no room for DNA after the prefix and the two tags")
    overlap = min(512, capacity // 4) if chunk_overlap is None else chunk_overlap // k
    if overlap >= capacity:
        raise ValueError(
            f"chunk_overlap={chunk_overlap} bp is not shorter than a chunk ({capacity} tokens = {capacity * k} bp)"
        )
    return prefix_ids, capacity, overlap


def prompt_count(record: SequenceRecord | BadRecord, layout: Any, capacity: int, overlap: int) -> int:
    """The forwards (chunks) :func:`embed_sequences` runs for a record (0 for one it cannot embed),
    with ``capacity``/``overlap`` from :func:`chunk_geometry`: what decides its groups."""
    if isinstance(record, BadRecord) or not isinstance(record.sequence, str):
        return 0
    seq = normalize_sequence(record.sequence)
    return len(chunk_plan(len(encode_dna(seq, layout).ids), capacity, overlap)) if seq else 0


#: records are embedded in groups that end once they hold this many prompts (chunks): a group's
#: batches never mix with another group's, so a record's vector depends only on its group
GROUP_PROMPTS = 64


def _embed(
    carbon: Frontend,
    records: Iterable[RecordLike],
    plan: _EmbedPlan,
    on_error: Callable[[str, str], None] | None,
) -> Iterator[tuple[str, np.ndarray | None]]:
    jobs: list[_Job] = []
    for i, item in enumerate(records):
        jobs.append(_prepare(carbon, _as_record(item, i), plan))
        if sum(len(j.prompts) for j in jobs) >= GROUP_PROMPTS:
            yield from _finish(carbon, jobs, plan, on_error)
            jobs = []
    if jobs:
        yield from _finish(carbon, jobs, plan, on_error)


def _text(rec: SequenceRecord | BadRecord) -> tuple[str, str | None]:
    """A record's normalised sequence, or ``("", reason)`` when it has none to embed."""
    if isinstance(rec, BadRecord):
        return "", rec.reason
    if not isinstance(rec.sequence, str):
        return "", f"sequence is a {type(rec.sequence).__name__}, not text"
    seq = normalize_sequence(rec.sequence)
    return seq, None if seq else "empty sequence"


def _settle(
    ident: str, vector: np.ndarray | None, error: str | None, on_error: Callable[[str, str], None] | None
) -> np.ndarray | None:
    """The vector a record yields: None, reported to ``on_error``, where it has none or it is not
    finite (NaN/inf hidden states, or a float32 overflow of the sum)."""
    if error is None and vector is not None and not np.isfinite(vector).all():
        error, vector = non_finite_output("embedding"), None
    if vector is None and on_error is not None:
        on_error(ident, error or "nothing to embed")
    return None if error is not None else vector


def _embed_served(
    backend: ServedEmbeddingBackend,
    records: Iterable[RecordLike],
    options: EmbeddingOptions,
    on_error: Callable[[str, str], None] | None,
) -> Iterator[tuple[str, np.ndarray | None]]:
    """Records in groups of :data:`GROUP_PROMPTS`, each group's sequences embedded by the backend."""
    group: list[SequenceRecord | BadRecord] = []
    for i, item in enumerate(records):
        group.append(_as_record(item, i))
        if len(group) >= GROUP_PROMPTS:
            yield from _finish_served(backend, group, options, on_error)
            group = []
    if group:
        yield from _finish_served(backend, group, options, on_error)


def _finish_served(
    backend: ServedEmbeddingBackend,
    group: list[SequenceRecord | BadRecord],
    options: EmbeddingOptions,
    on_error: Callable[[str, str], None] | None,
) -> Iterator[tuple[str, np.ndarray | None]]:
    texts = [_text(rec) for rec in group]
    todo = [j for j, (_, error) in enumerate(texts) if error is None]
    got = dict(zip(todo, backend.served_embeddings([texts[j][0] for j in todo], options), strict=True))
    for j, rec in enumerate(group):
        result = got.get(j, texts[j][1])
        vector = result.astype(np.float32) if isinstance(result, np.ndarray) else None
        yield rec.id, _settle(rec.id, vector, result if isinstance(result, str) else None, on_error)


def _prepare(carbon: Frontend, rec: SequenceRecord | BadRecord, plan: _EmbedPlan) -> _Job:
    seq, error = _text(rec)
    if error is not None:
        return _Job(rec.id, [], [], 0, error=error)
    lay = carbon.backend.layout
    ids = encode_dna(seq, lay).ids.tolist()
    chunks = chunk_plan(len(ids), plan.capacity, plan.overlap)
    head = [*plan.prefix_ids, lay.begin_id]
    prompts = [[*head, *ids[c.start : c.end], lay.end_id] for c in chunks]
    return _Job(rec.id, prompts, chunks, len(head))


@torch.inference_mode()
def _finish(
    carbon: Frontend, jobs: list[_Job], plan: _EmbedPlan, on_error: Callable[[str, str], None] | None
) -> Iterator[tuple[str, np.ndarray | None]]:
    work = [(j, c) for j, job in enumerate(jobs) for c in range(len(job.prompts))]
    work.sort(key=lambda jc: len(jobs[jc[0]].prompts[jc[1]]))
    batch: list[tuple[int, int]] = []
    for item in work:
        width = len(jobs[item[0]].prompts[item[1]])
        if batch and (len(batch) + 1 > plan.batch_size or (len(batch) + 1) * width > plan.token_budget):
            _run(carbon, jobs, batch, plan.pool, plan.layer)
            batch = []
        batch.append(item)
    if batch:
        _run(carbon, jobs, batch, plan.pool, plan.layer)
    for job in jobs:
        vector = None
        if job.error is None and job.total is not None:
            vector = (job.total / job.count if plan.pool == "mean" else job.total).astype(np.float32)
        yield job.id, _settle(job.id, vector, job.error, on_error)


def _run(carbon: Frontend, jobs: list[_Job], batch: list[tuple[int, int]], pool: Pool, layer: int) -> None:
    prompts = [jobs[j].prompts[c] for j, c in batch]
    hidden = embedding_backend(carbon).hidden_states(prompts, layer)
    for r, (j, c) in enumerate(batch):
        job, chunk = jobs[j], jobs[j].chunks[c]
        last_chunk = c == len(job.chunks) - 1
        if pool == "mean":
            lo = job.offset + chunk.own - chunk.start
            hi = job.offset + chunk.end - chunk.start
            part = hidden[r, lo:hi].double().sum(0).cpu().numpy()
            job.total = part if job.total is None else job.total + part
            job.count += hi - lo
        elif last_chunk:
            at = len(prompts[r]) - (2 if pool == "last" else 1)
            job.total = hidden[r, at].double().cpu().numpy()
