"""Raw inputs of a fine-tuning run, read as they are (no label checks yet: see :mod:`.data`).

* tables: Parquet, CSV, TSV (``.gz`` too; ``-`` reads standard input, TSV unless told), as
  columns of text (CSV/TSV cells are kept as the strings written) or Parquet values;
* FASTA: through :func:`hexamer.io.read_sequences` (its record errors: empty sequence, a character
  outside IUPAC, a repeated name);
* BED regions (headerless, tab-separated; ``track``/``browser``/``#`` lines skipped) and their
  sequences from an indexed reference FASTA (:class:`hexamer.io.reference.Reference`), reverse
  complemented on the ``-`` strand.

Errors are :class:`DataError`: ``FILE: row N (id 'x'): column 'c': reason`` with the parts known;
``row`` counts data rows from 1 (the header is not a row).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from hexamer.io import SequenceInputError, read_sequences, reverse_complement
from hexamer.io.fasta import FastaError
from hexamer.io.reference import Reference
from hexamer.io.stdio import STDIO, spool_stdin

__all__ = [
    "TABLE_INPUT_FORMATS",
    "DataError",
    "Region",
    "RowTable",
    "fetch_regions",
    "read_bed",
    "read_fasta",
    "read_rows",
    "table_input_format",
]

PathLike = str | os.PathLike[str]
TABLE_INPUT_FORMATS = ("parquet", "csv", "tsv")
_EXT = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "tsv"}


class DataError(ValueError):
    """Bad training data, found before any training: names the file, row, id and column known."""

    def __init__(
        self,
        source: str,
        reason: str,
        *,
        row: int | None = None,
        id: str | None = None,
        column: str | None = None,
    ) -> None:
        self.source, self.reason, self.row, self.id, self.column = source, reason, row, id, column
        parts = [source]
        if row is not None:
            parts.append(f"row {row}" + (f" (id {id!r})" if id is not None else ""))
        if column is not None:
            parts.append(f"column {column!r}")
        super().__init__(": ".join([*parts, reason]))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.source, self.reason, self.row, self.id, self.column))


def _rebuild(source: str, reason: str, row: int | None, id: str | None, column: str | None) -> DataError:
    return DataError(source, reason, row=row, id=id, column=column)


@dataclass(frozen=True)
class RowTable:
    """A table's columns (name -> one value per row) and where it came from."""

    source: str
    columns: tuple[str, ...]
    data: dict[str, list[Any]]

    def __len__(self) -> int:
        return len(self.data[self.columns[0]]) if self.columns else 0

    def column(self, name: str, what: str = "column") -> list[Any]:
        """The column's values; a missing one raises :class:`DataError` listing the columns found."""
        if name not in self.data:
            found = ", ".join(map(repr, self.columns)) or "none"
            raise DataError(self.source, f"no {what} {name!r}; the columns are {found}")
        return self.data[name]


def table_input_format(path: PathLike, format: str | None = None) -> str:
    """``parquet``/``csv``/``tsv`` from ``format`` or the extension (``.gz`` ignored); ``-`` is TSV."""
    if format is not None:
        if format not in TABLE_INPUT_FORMATS:
            raise ValueError(f"unknown table format {format!r}; supported: {', '.join(TABLE_INPUT_FORMATS)}")
        return format
    name = os.fspath(path).lower()
    if name == STDIO:
        return "tsv"
    name = name.removesuffix(".gz")
    fmt = _EXT.get(os.path.splitext(name)[1])
    if fmt is None:
        raise DataError(
            os.fspath(path), "cannot tell the table format; use .parquet, .csv or .tsv (or name it)"
        )
    return fmt


def _open_text(path: str) -> IO[str]:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    raw: IO[bytes] = gzip.open(path, "rb") if gz else open(path, "rb")  # noqa: SIM115
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def _read_delimited(path: str, display: str, delimiter: str) -> RowTable:
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    with _open_text(path) as text:
        reader = csv.reader(text, delimiter=delimiter)
        try:
            header = [h.strip() for h in next(reader, [])]
            if not header or not any(header):
                raise DataError(display, "empty file: no header row")
            dup = sorted({h for h in header if header.count(h) > 1})
            if dup:
                raise DataError(display, f"the header repeats column(s) {', '.join(map(repr, dup))}")
            cols: list[list[str]] = [[] for _ in header]
            row = 0
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue
                row += 1
                if len(fields) != len(header):
                    raise DataError(display, f"{len(fields)} fields, the header has {len(header)}", row=row)
                for c, value in zip(cols, fields, strict=True):
                    c.append(value)
        except (csv.Error, UnicodeDecodeError, EOFError, OSError) as exc:
            raise DataError(
                display, f"cannot parse as {'TSV' if delimiter == chr(9) else 'CSV'}: {exc}"
            ) from exc
    return RowTable(display, tuple(header), dict(zip(header, cols, strict=True)))


def _read_parquet(path: str, display: str) -> RowTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(display, f"not a readable Parquet file: {exc}") from exc
    return RowTable(display, tuple(table.column_names), table.to_pydict())


def read_rows(path: PathLike, *, format: str | None = None) -> RowTable:
    """Every row of a Parquet/CSV/TSV table; ``-`` spools standard input first (TSV by default)."""
    fmt = table_input_format(path, format)
    display = os.fspath(path)
    if display == STDIO:
        fd, tmp = tempfile.mkstemp(prefix="hexamer-finetune-")
        os.close(fd)
        try:
            spool_stdin(tmp)
            return _read_table_file(tmp, "<stdin>", fmt)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    if not os.path.isfile(display):
        raise DataError(display, "no such file" if not os.path.exists(display) else "not a regular file")
    return _read_table_file(display, display, fmt)


def _read_table_file(path: str, display: str, fmt: str) -> RowTable:
    if fmt == "parquet":
        return _read_parquet(path, display)
    return _read_delimited(path, display, "\t" if fmt == "tsv" else ",")


def read_fasta(path: PathLike) -> tuple[list[str], list[str]]:
    """``(names, sequences)`` of a FASTA/FASTQ file (``-``: standard input); the first bad record
    (empty, invalid character, repeated name) raises :class:`DataError` naming it."""
    display = "<stdin>" if os.fspath(path) == STDIO else os.fspath(path)
    names: list[str] = []
    seqs: list[str] = []
    try:
        for rec in read_sequences(path, on_error="raise", format="fasta"):
            names.append(rec.id)  # type: ignore[union-attr]
            seqs.append(rec.sequence)  # type: ignore[union-attr]
    except SequenceInputError as exc:
        raise DataError(display, exc.reason, row=exc.record) from exc
    if not names:
        raise DataError(display, "no sequences")
    return names, seqs


@dataclass(frozen=True)
class Region:
    """A BED region: 0-based half-open ``[start, end)`` on ``chrom``, ``strand`` ``+``/``-``/``.``."""

    name: str
    chrom: str
    start: int
    end: int
    strand: str = "."


def _bed_lines(path: str) -> Iterator[tuple[int, list[str]]]:
    with _open_text(path) as text:
        row = 0
        for line in text:
            s = line.rstrip("\r\n")
            if not s.strip() or s.startswith(("#", "track", "browser")):
                continue
            row += 1
            yield row, s.split("\t")


def read_bed(path: PathLike) -> list[Region]:
    """Regions of a BED file (3+ columns; name in column 4, default ``chrom:start-end``; strand in
    column 6, default ``.``). Coordinates are checked; names must be unique (they join labels)."""
    display = os.fspath(path)
    if not os.path.isfile(display):
        raise DataError(display, "no such file")
    out: list[Region] = []
    first: dict[str, int] = {}
    for row, f in _bed_lines(display):
        if len(f) < 3:
            raise DataError(display, f"a BED line needs chrom, start and end; got {len(f)} field(s)", row=row)
        try:
            start, end = int(f[1]), int(f[2])
        except ValueError:
            raise DataError(display, f"start/end must be integers, got {f[1]!r}, {f[2]!r}", row=row) from None
        name = f[3] if len(f) > 3 and f[3] not in ("", ".") else f"{f[0]}:{start}-{end}"
        strand = f[5] if len(f) > 5 else "."
        if not (0 <= start < end):
            raise DataError(display, f"need 0 <= start < end, got {start}, {end}", row=row, id=name)
        if strand not in ("+", "-", "."):
            raise DataError(display, f"strand must be +, - or ., got {strand!r}", row=row, id=name)
        if name in first:
            raise DataError(display, f"name repeats row {first[name]}", row=row, id=name)
        first[name] = row
        out.append(Region(name, f[0], start, end, strand))
    if not out:
        raise DataError(display, "no regions")
    return out


def fetch_regions(reference: PathLike, regions: Sequence[Region], *, source: str) -> list[str]:
    """The sequence of each region from ``reference`` (upper case; reverse complement on ``-``).

    Contig names resolve as in ``hexamer vep`` (``chr1``/``1``, accessions); a region on an unknown
    contig or past its end raises :class:`DataError` naming ``source`` and the row."""
    try:
        ref = Reference(reference)
    except (FastaError, OSError) as exc:
        raise DataError(os.fspath(reference), str(exc)) from exc
    seqs: list[str] = []
    with ref:
        for row, r in enumerate(regions, 1):
            contig, message = ref.resolve(r.chrom)
            if contig is None:
                raise DataError(source, f"contig {r.chrom!r}: {message}", row=row, id=r.name)
            if r.end > ref.lengths[contig]:
                raise DataError(
                    source,
                    f"region ends at {r.end}, past the end of {contig!r} ({ref.lengths[contig]} bp)",
                    row=row,
                    id=r.name,
                )
            seq = ref.fetch(contig, r.start, r.end)
            seqs.append(reverse_complement(seq) if r.strand == "-" else seq)
    return seqs
