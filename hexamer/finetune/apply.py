"""Applying a head folder: predictions on the raw label scale for sequence files and BED regions.

A :class:`Predictor` is a loaded head folder plus how to run it (strands, batch size). Its outputs
are what a user reads: regression targets on the scale of the training labels (the folder's label
transform, inverted) and class probabilities for classification, one column per output
(:func:`output_columns`). Sequences are normalised with the rule training used
(:func:`hexamer.finetune.data.normalize_dna`), so a prediction sees what training saw.

Every input record is one row, in input order: ``ok`` with its values; ``skipped`` for a record the
reader flags (:class:`hexamer.io.BadRecord`: no id, a repeated id, an empty sequence, a character
that is not a nucleotide code) or a region that cannot be fetched; ``failed`` for a sequence the
model cannot take (longer than its context). A bad record never stops the job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hexamer.finetune.data import normalize_dna
from hexamer.finetune.folders import HEAD_ARCHITECTURE, is_head_folder, load_classifier, settings_from_config
from hexamer.finetune.head import HeadSettings, SequenceClassifier
from hexamer.finetune.inputs import Region, read_bed
from hexamer.finetune.predict import predict
from hexamer.finetune.task import TaskSpec
from hexamer.finetune.transform import LabelTransform
from hexamer.io import BadRecord, SequenceRecord, TableWriter, read_sequences, reverse_complement
from hexamer.io.reference import Reference
from hexamer.model.config import read_config_json

__all__ = [
    "PREDICTION_STATUSES",
    "HeadFolderError",
    "Predictor",
    "check_head_folder",
    "output_columns",
    "predict_records",
    "predict_regions",
    "prediction_rows",
    "prediction_schema",
    "read_head_settings",
    "write_predictions",
]

PathLike = str | os.PathLike[str]
#: ``ok`` predicted; ``skipped`` a bad input record or region; ``failed`` the model cannot take it
PREDICTION_STATUSES = ("ok", "skipped", "failed")
Row = dict[str, Any]


class HeadFolderError(ValueError):
    """The folder given is not a head folder (a plain language model, say)."""


def check_head_folder(folder: PathLike) -> Path:
    """``folder`` when it is a head folder; else :class:`HeadFolderError` saying what it is. Reads
    config.json only, so it runs before any weights load."""
    path = Path(folder)
    try:
        head = is_head_folder(path)
    except (FileNotFoundError, ValueError) as exc:
        raise HeadFolderError(str(exc)) from None
    if not head:
        raise HeadFolderError(
            f"{path} is a language model folder, not a fine-tuned head folder (config.json does not name "
            f"{HEAD_ARCHITECTURE}); predictions need a folder written by hexamer finetune (or "
            "transformers' LlamaForSequenceClassification); score a language model with hexamer score or vep"
        )
    return path


def read_head_settings(folder: PathLike) -> HeadSettings:
    """What a head folder records (task, training length, strands), from its config.json alone:
    a job can be planned, and its options checked, before any weights load."""
    path = check_head_folder(folder)
    raw = read_config_json(path / "config.json", path)
    return settings_from_config(raw, path / "config.json")


def output_columns(task: TaskSpec) -> tuple[str, ...]:
    """The column of each output: the label column of a regression target, ``p_<class>`` for the
    probability of a class (binary, multiclass) or label (multilabel)."""
    if task.kind == "regression":
        return task.label_columns
    return tuple(f"p_{name}" for name in task.output_names)


@dataclass
class Predictor:
    """A loaded head folder and how to run it. ``rc_average`` None = the folder's own setting."""

    model: SequenceClassifier
    rc_average: bool | None = None
    batch_size: int = 32
    bf16: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 65536:
            raise ValueError(f"batch_size must be in 1..65536, got {self.batch_size}")
        if self.rc_average is None:
            self.rc_average = self.model.settings.rc_average

    @classmethod
    def load(
        cls,
        folder: PathLike,
        *,
        dtype: str | torch.dtype = "float32",
        device: str = "cpu",
        rc_average: bool | None = None,
        batch_size: int = 32,
    ) -> Predictor:
        """Load a head folder (checked to be one first). ``dtype`` ``bfloat16`` runs the model in it."""
        path = check_head_folder(folder)
        model = load_classifier(path, dtype=dtype, device=device)
        return cls(model, rc_average=rc_average, batch_size=batch_size)

    @property
    def task(self) -> TaskSpec:
        return self.model.task

    @property
    def columns(self) -> tuple[str, ...]:
        return output_columns(self.task)

    @property
    def transform(self) -> LabelTransform:
        """The folder's label transform (identity when it records none)."""
        raw = self.model.settings.label_transform
        if raw is None:
            return LabelTransform("identity", self.task.output_names)
        return LabelTransform.from_json(raw)

    @property
    def training_length(self) -> int | None:
        """The longest training sequence (bp) the folder records, else None."""
        return self.model.settings.max_length

    @property
    def max_bp(self) -> int:
        """The longest sequence the model takes: ``<dna>`` + whole 6-mers + ``</dna>``."""
        k = self.model.tokenizer.layout.k
        return k * (self.model.context_length - 2)

    def predict(self, sequences: Sequence[str]) -> np.ndarray:
        """Raw-scale outputs ``(n, outputs)`` float64 of normalised sequences (regression: the
        inverted label transform; classification: probabilities)."""
        out = predict(
            self.model, sequences, batch_size=self.batch_size, rc_average=self.rc_average, bf16=self.bf16
        )
        return np.asarray(self.transform.inverse(out), dtype=np.float64)


def _row(base: Row, columns: Sequence[str], status: str, error: str | None, values: Any = None) -> Row:
    row = {**base, "status": status, "error": error}
    for j, c in enumerate(columns):
        row[c] = None if values is None else float(values[j])
    return row


def prediction_rows(predictor: Predictor, items: Iterable[tuple[Row, str | None, str | None]]) -> list[Row]:
    """Rows for ``(base, sequence, reason)`` items: a reason makes a ``skipped`` row; a sequence
    that cannot be normalised or is too long a ``failed`` one; the rest are predicted together."""
    columns = predictor.columns
    rows: list[Row | None] = []
    todo: list[tuple[int, Row, str]] = []
    for base, seq, reason in items:
        if reason is not None or seq is None:
            rows.append(_row(base, columns, "skipped", reason or "no sequence"))
            continue
        try:
            clean = normalize_dna(seq)
        except ValueError as exc:
            rows.append(_row(base, columns, "failed", str(exc)))
            continue
        if not clean:
            rows.append(_row(base, columns, "skipped", "empty sequence"))
        elif len(clean) > predictor.max_bp:
            why = f"{len(clean)} bp is longer than the model takes ({predictor.max_bp} bp)"
            rows.append(_row(base, columns, "failed", why))
        else:
            todo.append((len(rows), base, clean))
            rows.append(None)
    if todo:
        values = predictor.predict([s for _, _, s in todo])
        for (i, base, _), v in zip(todo, values, strict=True):
            rows[i] = _row(base, columns, "ok", None, v)
    return [r for r in rows if r is not None]


def _record_items(
    records: Iterable[SequenceRecord | BadRecord],
) -> Iterator[tuple[Row, str | None, str | None]]:
    for rec in records:
        base = {"record": rec.index, "id": rec.id}
        if isinstance(rec, BadRecord):
            yield base, None, rec.reason
        else:
            yield base, rec.sequence, None


def predict_records(
    predictor: Predictor,
    path: PathLike,
    *,
    format: Any = None,
    chunk: int = 1024,
) -> Iterator[list[Row]]:
    """Rows (``record``, ``id``, ``status``, ``error``, one column per output) for every record of a
    FASTA/FASTQ/txt/table file (:func:`hexamer.io.read_sequences`; ``-`` = standard input), in
    input order, ``chunk`` records at a time. A bad file raises
    :class:`hexamer.io.SequenceInputError` at the call."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    records = read_sequences(path, format=format)
    return _chunked_rows(predictor, _record_items(records), chunk)


def _chunked_rows(
    predictor: Predictor, items: Iterator[tuple[Row, str | None, str | None]], chunk: int
) -> Iterator[list[Row]]:
    batch: list[tuple[Row, str | None, str | None]] = []
    for item in items:
        batch.append(item)
        if len(batch) >= chunk:
            yield prediction_rows(predictor, batch)
            batch = []
    if batch:
        yield prediction_rows(predictor, batch)


def _region_items(
    regions: Sequence[Region], reference: Reference
) -> Iterator[tuple[Row, str | None, str | None]]:
    for i, r in enumerate(regions):
        base = {
            "record": i,
            "id": r.name,
            "chrom": r.chrom,
            "start": r.start,
            "end": r.end,
            "strand": r.strand,
        }
        contig, message = reference.resolve(r.chrom)
        if contig is None:
            yield base, None, message or f"contig {r.chrom!r} is not in the FASTA"
            continue
        length = reference.lengths[contig]
        if r.end > length:
            yield base, None, f"region ends at {r.end}, past the end of {contig!r} ({length} bp)"
            continue
        seq = reference.fetch(contig, r.start, r.end)
        yield base, reverse_complement(seq) if r.strand == "-" else seq, None


def predict_regions(
    predictor: Predictor, bed: PathLike, fasta: PathLike, *, chunk: int = 1024
) -> Iterator[list[Row]]:
    """Rows for every region of a BED file (read with :func:`hexamer.finetune.inputs.read_bed`,
    so a malformed line is an error before any work): the region's bases from ``fasta``, reverse
    complemented on ``-`` strands, with ``chrom``/``start``/``end``/``strand`` beside the values.
    A region on a contig the FASTA lacks, or past its end, is a ``skipped`` row."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    regions = read_bed(bed)
    reference = Reference(fasta)
    return _closing(reference, _chunked_rows(predictor, _region_items(regions, reference), chunk))


def _closing(reference: Reference, rows: Iterator[list[Row]]) -> Iterator[list[Row]]:
    with reference:
        yield from rows


def prediction_schema(predictor: Predictor, *, regions: bool = False) -> Any:
    """The Arrow schema of prediction rows: ``record``, ``id`` (and the region's ``chrom``,
    ``start``, ``end``, ``strand``), ``status``, ``error``, then one float64 column per output."""
    import pyarrow as pa

    fields = [("record", pa.int64()), ("id", pa.string())]
    if regions:
        fields += [
            ("chrom", pa.string()),
            ("start", pa.int64()),
            ("end", pa.int64()),
            ("strand", pa.string()),
        ]
    fields += [("status", pa.string()), ("error", pa.string())]
    names = {name for name, _ in fields}
    clash = [c for c in predictor.columns if c in names]
    if clash:
        raise ValueError(f"output column(s) {', '.join(clash)} repeat a column of the prediction table")
    return pa.schema([*fields, *((c, pa.float64()) for c in predictor.columns)])


def write_predictions(
    path: PathLike,
    predictor: Predictor,
    chunks: Iterable[list[Row]],
    *,
    regions: bool = False,
    on_rows: Callable[[list[Row]], None] | None = None,
) -> dict[str, int]:
    """Stream prediction rows into a table (``.parquet``/``.tsv``/``.csv``/``.jsonl``, written
    atomically: a failed job leaves no partial file); returns rows per status."""
    schema = prediction_schema(predictor, regions=regions)
    counts: dict[str, int] = {}
    with TableWriter(path, schema=schema) as writer:
        for rows in chunks:
            writer.write_batch([{c: r.get(c) for c in schema.names} for r in rows])
            for r in rows:
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            if on_rows is not None:
                on_rows(rows)
    return counts
