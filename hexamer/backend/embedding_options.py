"""What :func:`hexamer.embed.embed_sequences` asks of a backend that embeds whole sequences where
the model runs (a :class:`~hexamer.backend.protocol.ServedEmbeddingBackend`), checked there once."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["EmbeddingOptions"]


@dataclass(frozen=True)
class EmbeddingOptions:
    """The options that decide a vector, already checked by :func:`hexamer.embed.embed_sequences`
    (whose docstring says what each means): ``pool`` (mean, last or sep), ``layer`` (an index from
    0 to ``num_layers``: negative ones are resolved), the ``prefix`` of metadata tags, the chunking of
    long sequences (``max_tokens``, ``chunk_overlap`` in bp; ``None``: the model's defaults), and
    ``batch_size``, the sequences of one request to the server."""

    pool: str = "mean"
    layer: int = -1
    prefix: str = ""
    max_tokens: int | None = None
    chunk_overlap: int | None = None
    batch_size: int = 8
