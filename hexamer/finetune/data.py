"""Labelled sequences for fine-tuning: read, checked and normalised before any model is loaded.

Three inputs give the same :class:`ReadResult` (a :class:`TaskSpec` and a :class:`LabelledSet`):

* :func:`load_table`: a Parquet/CSV/TSV table with a sequence column and label columns (or, with
  ``reference=``, ``chrom``/``start``/``end``/[``strand``] region columns instead of sequences);
* :func:`load_fasta`: a FASTA file and a labels table joined by record name (the table's id column);
* :func:`load_bed`: BED regions cut from a reference FASTA (strand-aware), joined to a labels table
  by the BED name column.

Every problem is a :class:`~hexamer.finetune.inputs.DataError` naming the file, the 1-based data
row (and id) and the column: a missing or non-numeric label column, a missing, NaN or infinite
label, a classification label column with one class only, a duplicate id, an empty sequence, a
character outside the IUPAC codes, a bad weight.

Sequence rule (:func:`normalize_dna`, the same in training and prediction): whitespace removed,
upper case, ``U`` -> ``T``, every IUPAC ambiguity code (R Y K M S W B D H V) -> ``N``. Carbon's
tokenizer writes DNA as non-overlapping 6-mers and sends any 6-mer holding an ``N`` to ``<oov>``
(docs/tokenizer.md), so one ``N`` hides its whole 6-mer; the count of rows holding ``N`` is in
:attr:`ReadResult.notes`.

Class labels and the other label cells are parsed in :mod:`hexamer.finetune.labels` (class
names sorted, numerically when every value is an integer).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hexamer.finetune.inputs import (
    DataError,
    Region,
    RowTable,
    fetch_regions,
    read_bed,
    read_fasta,
    read_rows,
)
from hexamer.finetune.labels import AlignedRows, metric_mask, number_cell, parse_labels, row_weights
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.io import IUPAC_CODES

__all__ = [
    "ReadOptions",
    "ReadResult",
    "check_lengths",
    "load_bed",
    "load_fasta",
    "load_table",
    "normalize_dna",
]

_TO_MODEL = str.maketrans("URYKMSWBDHV", "TNNNNNNNNNN")
_INVALID = re.compile(f"[^{IUPAC_CODES}]")


def normalize_dna(seq: str) -> str:
    """The documented rule (module text): upper case, U -> T, ambiguity codes -> N. A character
    outside the IUPAC codes raises ``ValueError`` with its position."""
    s = "".join(seq.split()).upper()
    bad = _INVALID.search(s)
    if bad is not None:
        raise ValueError(
            f"character {bad.group()!r} at position {bad.start() + 1} is not an IUPAC nucleotide code"
        )
    return s.translate(_TO_MODEL)


@dataclass(frozen=True)
class ReadOptions:
    """What to read. ``task`` is ``regression`` or ``classification`` (binary, multiclass or, with
    several label columns, multilabel — decided from the data). Column defaults: ids from ``id``
    when present (else ``row<N>``); chromosomes from ``chrom`` when present. ``metric_filter``:
    clauses such as ``lfcSE_K562<=1`` (all must hold; NaN fails) for rows that count in metrics.
    ``class_names``: the training classes, given when reading validation/test data."""

    task: Literal["regression", "classification"]
    label_columns: tuple[str, ...]
    sequence_column: str = "sequence"
    id_column: str | None = None
    chrom_column: str | None = None
    weight_column: str | None = None
    split_column: str | None = None
    metric_filter: tuple[str, ...] = ()
    class_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.task not in ("regression", "classification"):
            raise ValueError(f"task must be 'regression' or 'classification', got {self.task!r}")
        cols = tuple(self.label_columns)
        object.__setattr__(self, "label_columns", cols)
        if not cols or len(set(cols)) != len(cols) or not all(cols):
            raise ValueError(f"label columns must be distinct non-empty names, got {list(cols)}")
        if self.sequence_column in cols:
            raise ValueError(f"{self.sequence_column!r} is both the sequence column and a label column")


@dataclass(frozen=True)
class ReadResult:
    """What was read: the task, the rows, their ``split`` column values (when asked), notes."""

    task: TaskSpec
    data: LabelledSet
    source: str
    split_values: tuple[str, ...] | None = None
    notes: tuple[str, ...] = field(default=())
    rows_with_n: int = 0


def _column_or_default(table: RowTable, given: str | None, default: str) -> str | None:
    if given is not None:
        table.column(given)  # raises naming the columns found
        return given
    return default if default in table.data else None


def _strings(table: RowTable, col: str, rows: Sequence[int], ids: Sequence[str]) -> list[str]:
    out = []
    for i, v in enumerate(table.column(col)):
        text = "" if v is None else str(v).strip()
        if not text:
            raise DataError(table.source, "empty value", row=rows[i], id=ids[i], column=col)
        out.append(text)
    return out


def _check_ids(r: AlignedRows) -> None:
    first: dict[str, int] = {}
    for i, rid in enumerate(r.ids):
        if rid in first:
            raise DataError(
                r.seq_source,
                f"duplicate id (first in row {r.seq_rows[first[rid]]})",
                row=r.seq_rows[i],
                id=rid,
            )
        first[rid] = i


def _sequences(r: AlignedRows, column: str | None) -> tuple[list[str], int]:
    out, with_n = [], 0
    for i, s in enumerate(r.seqs):
        text = "" if s is None else str(s)
        if not text.strip():
            raise DataError(r.seq_source, "empty sequence", row=r.seq_rows[i], id=r.ids[i], column=column)
        try:
            seq = normalize_dna(text)
        except ValueError as exc:
            raise DataError(r.seq_source, str(exc), row=r.seq_rows[i], id=r.ids[i], column=column) from None
        with_n += "N" in seq
        out.append(seq)
    return out, with_n


def _build(r: AlignedRows, opts: ReadOptions, seq_column: str | None) -> ReadResult:
    _check_ids(r)
    seqs, with_n = _sequences(r, seq_column)
    task, labels = parse_labels(r, opts.task, opts.label_columns, opts.class_names)
    chrom_col = _column_or_default(r.table, opts.chrom_column, "chrom")
    chroms = _strings(r.table, chrom_col, r.label_rows, r.ids) if chrom_col else r.chroms
    split_col = opts.split_column
    splits = None if split_col is None else tuple(_strings(r.table, split_col, r.label_rows, r.ids))
    data = LabelledSet(
        ids=tuple(r.ids),
        sequences=tuple(seqs),
        labels=labels,
        weights=row_weights(r, opts.weight_column),
        chroms=None if chroms is None else tuple(chroms),
        metric_mask=metric_mask(r, opts.metric_filter),
    )
    notes = []
    if with_n:
        notes.append(
            f"{r.seq_source}: {with_n} of {len(seqs)} rows hold N (or an ambiguity code, read as N); "
            "each 6-mer holding one is tokenised as <oov>"
        )
    if data.metric_mask is not None:
        notes.append(f"metric filter keeps {int(data.metric_mask.sum())} of {len(data)} rows for metrics")
    return ReadResult(task, data, r.seq_source, splits, tuple(notes), with_n)


# --------------------------------------------------------------------------- entry points


def load_table(
    path: str, opts: ReadOptions, *, format: str | None = None, reference: str | None = None
) -> ReadResult:
    """A Parquet/CSV/TSV table (``-``: standard input, TSV unless ``format``); with ``reference``,
    sequences are cut from it at the ``chrom``/``start``/``end``/[``strand``] columns (BED
    coordinates: 0-based, end exclusive)."""
    table = read_rows(path, format=format)
    n = len(table)
    if n == 0:
        raise DataError(table.source, "no data rows")
    rows = list(range(1, n + 1))
    id_col = _column_or_default(table, opts.id_column, "id")
    ids = _strings(table, id_col, rows, [f"row{i}" for i in rows]) if id_col else [f"row{i}" for i in rows]
    if reference is None:
        seqs = table.column(opts.sequence_column, "sequence column")
        return _build(AlignedRows(table.source, ids, seqs, rows, table, rows), opts, opts.sequence_column)
    regions = _table_regions(table, ids)
    seqs = fetch_regions(reference, regions, source=table.source)
    r = AlignedRows(table.source, ids, seqs, rows, table, rows, [g.chrom for g in regions])
    return _build(r, opts, None)


def _table_regions(table: RowTable, ids: Sequence[str]) -> list[Region]:
    chroms = table.column("chrom", "region column")
    starts, ends = table.column("start", "region column"), table.column("end", "region column")
    strands = table.data.get("strand", ["."] * len(table))
    out = []
    for i in range(len(table)):
        start = int(number_cell(starts[i], table.source, i + 1, ids[i], "start", "start"))
        end = int(number_cell(ends[i], table.source, i + 1, ids[i], "end", "end"))
        strand = str(strands[i] or ".").strip()
        if not (0 <= start < end) or strand not in ("+", "-", "."):
            reason = f"need 0 <= start < end and strand +, - or .; got {start}, {end}, {strand!r}"
            raise DataError(table.source, reason, row=i + 1, id=ids[i])
        out.append(Region(ids[i], str(chroms[i]).strip(), start, end, strand))
    return out


def _join(names: Sequence[str], table: RowTable, id_col: str, seq_source: str) -> tuple[RowTable, list[int]]:
    """The label table's rows in the order of ``names``; a name with no row or a row with no
    record is an error naming it."""
    keys = [str(v).strip() if v is not None else "" for v in table.column(id_col, "id column")]
    where: dict[str, int] = {}
    for i, k in enumerate(keys):
        if k in where:
            raise DataError(
                table.source, f"duplicate id (first in row {where[k] + 1})", row=i + 1, id=k, column=id_col
            )
        where[k] = i
    missing = [n for n in names if n not in where]
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise DataError(
            seq_source, f"record {missing[0]!r}{more} has no row in {table.source} (column {id_col!r})"
        )
    extra = set(where) - set(names)
    if extra:
        first = min(where[k] for k in extra)
        raise DataError(
            table.source,
            f"no record of this name in {seq_source}",
            row=first + 1,
            id=keys[first],
            column=id_col,
        )
    order = [where[n] for n in names]
    data = {c: [vals[i] for i in order] for c, vals in table.data.items()}
    return RowTable(table.source, table.columns, data), [i + 1 for i in order]


def load_fasta(fasta: str, labels: str, opts: ReadOptions, *, format: str | None = None) -> ReadResult:
    """FASTA records joined to a labels table by name (the table's ``id`` column or ``id_column``)."""
    names, seqs = read_fasta(fasta)
    table = read_rows(labels, format=format)
    joined, label_rows = _join(names, table, opts.id_column or "id", fasta)
    r = AlignedRows(fasta, list(names), seqs, list(range(1, len(names) + 1)), joined, label_rows)
    return _build(r, opts, None)


def load_bed(
    bed: str, reference: str, labels: str, opts: ReadOptions, *, format: str | None = None
) -> ReadResult:
    """BED regions (strand-aware) cut from ``reference``, joined to a labels table by the BED name
    (the table's ``id`` column or ``id_column``); chromosomes come from the BED."""
    regions = read_bed(bed)
    seqs = fetch_regions(reference, regions, source=bed)
    names = [g.name for g in regions]
    joined, label_rows = _join(names, read_rows(labels, format=format), opts.id_column or "id", bed)
    r = AlignedRows(
        bed, names, seqs, list(range(1, len(names) + 1)), joined, label_rows, [g.chrom for g in regions]
    )
    return _build(r, opts, None)


def check_lengths(data: LabelledSet, max_bp: int, *, source: str = "input") -> None:
    """Refuse sequences longer than ``max_bp`` (what the model's context holds), naming the first
    such row (its position in ``data`` + 1, i.e. its data row when ``data`` is a whole input) and
    how many there are. Call it on the rows as read, before splitting and before training."""
    if max_bp < 1:
        raise ValueError(f"max_bp must be >= 1, got {max_bp}")
    lengths = np.fromiter((len(s) for s in data.sequences), dtype=np.int64, count=len(data))
    over = np.flatnonzero(lengths > max_bp)
    if over.size:
        i = int(over[0])
        raise DataError(
            source,
            f"sequence of {lengths[i]} bp is longer than the model's context ({max_bp} bp); "
            f"{over.size} row(s) are too long (longest {int(lengths.max())} bp): shorten them",
            row=i + 1,
            id=data.ids[i],
        )
