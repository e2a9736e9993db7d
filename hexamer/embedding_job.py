"""The embed batch job (``hexamer embed``): one vector per record of a sequence file, written as
Parquet or ``.npy`` (+ ids). A record without a vector (unreadable, or one the model cannot
take) stays in the output, with no vector and its reason; its scale-out is
:func:`hexamer.distributed.embed`, which takes the same :class:`EmbeddingSettings`."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.io import BadRecord, SequenceRecord

__all__ = ["EmbeddingResult", "EmbeddingSettings", "run_embedding"]


@dataclass(frozen=True)
class EmbeddingSettings:
    """The options that decide the vectors (those of ``hexamer embed``): how tokens are pooled
    (``pool``: mean, last or sep), the hidden ``layer``, the chunking of long sequences
    (``max_tokens``, ``chunk_overlap``), the prompt ``prefix`` and ``batch_size``."""

    pool: str = "mean"
    layer: int = -1
    max_tokens: int | None = None
    chunk_overlap: int | None = None
    prefix: str = ""
    batch_size: int = 8

    def as_dict(self) -> dict[str, Any]:
        """The keywords of :func:`hexamer.embed.embed_sequences`."""
        return asdict(self)

    def driver_options(self) -> dict[str, Any]:
        """The keywords of :func:`hexamer.distributed.embed` (whose ``pool`` is the actors)."""
        options = self.as_dict()
        options["pooling"] = options.pop("pool")
        return options


@dataclass
class EmbeddingResult:
    """A finished job: the records written and why each one without a vector has none."""

    output: str
    n_records: int = 0
    errors: dict[str, str] = field(default_factory=dict)


def run_embedding(
    carbon: Carbon,
    input_file: str | os.PathLike[str],
    output: str | os.PathLike[str],
    settings: EmbeddingSettings,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_bad_record: Callable[[BadRecord], None] | None = None,
    on_failed: Callable[[str, str], None] | None = None,
) -> EmbeddingResult:
    """Embed every record of ``input_file`` (a sequence file; ``-``: FASTA on standard input) into
    ``output`` (``.parquet`` or ``.npy``). ``on_bad_record`` hears of a record the reader rejects,
    ``on_failed(id, reason)`` of one the model could not embed, ``on_progress`` of each record
    written. A ``SequenceInputError`` or ``ValueError`` says what is wrong with the input; on a
    served model, ``UnsupportedOperation`` that the server cannot give hexamer's embeddings (vLLM,
    SGLang)."""
    from hexamer.embed import embed_sequences, write_embeddings
    from hexamer.io import read_sequences

    result = EmbeddingResult(output=os.fspath(output))

    def on_error(ident: str, reason: str) -> None:
        if ident not in result.errors:
            result.errors[ident] = reason
            if on_failed is not None:
                on_failed(ident, reason)

    records = _kept_records(read_sequences(os.fspath(input_file)), result.errors, on_bad_record)
    items = embed_sequences(carbon, records, on_error=on_error, **settings.as_dict())
    result.n_records = write_embeddings(
        output,
        items,
        errors=result.errors,
        on_item=None if on_progress is None else (lambda _: on_progress(1)),
    )
    return result


def _kept_records(
    records: Iterator[SequenceRecord | BadRecord],
    errors: dict[str, str],
    on_bad_record: Callable[[BadRecord], None] | None,
) -> Iterator[SequenceRecord]:
    """The records, a bad one as an empty record (its row stays, with no vector and its reason)."""
    from hexamer.io import BadRecord, SequenceRecord

    for rec in records:
        if isinstance(rec, BadRecord):
            ident = rec.id or f"record{rec.index}"
            errors[ident] = rec.reason
            if on_bad_record is not None:
                on_bad_record(rec)
            yield SequenceRecord(id=ident, sequence="", index=rec.index)
        else:
            yield rec
