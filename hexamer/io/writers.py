"""Atomic outputs: FASTA and tables (Parquet, TSV, CSV, JSONL), written whole or streamed.

A job killed mid-write must never leave a truncated file that looks like a result. Every writer
here writes to a hidden temp file next to the destination (``.NAME.<random>.tmp``: same directory,
so same filesystem and an atomic rename), flushes it to disk, and ``os.replace``-s it onto the
destination only once everything is written. On any exception the temp file is removed and an
existing destination is left untouched. Only a hard kill (SIGKILL, power loss) can leave a
``.NAME.*.tmp`` behind, never a half-written ``NAME``.

Table cells: list/array values (per-base log-probabilities, ...) become Parquet list columns; in
TSV/CSV a list of numbers is one comma-joined cell (floats with 6 significant digits, integers
exact), other lists/dicts are JSON. Scalar floats keep full precision everywhere. JSONL is strict
JSON (RFC 8259 has no non-finite numbers): NaN (an unscored base) and ``inf``/``-inf`` (a
log-probability of an impossible base) are written as ``null``, because ``NaN``/``Infinity`` are
Python extensions that strict readers (``jq``, browsers, Go, Rust) refuse line and all. Parquet
keeps them as IEEE floats; TSV/CSV cells read ``nan``/``inf``/``-inf``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import secrets
import warnings
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Literal

from hexamer.io.sequences import SequenceRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "TABLE_FORMATS",
    "AtomicTarget",
    "TableWriter",
    "atomic_path",
    "table_format",
    "write_fasta",
    "write_table",
]

PathLike = str | os.PathLike[str]
TableFormat = Literal["parquet", "tsv", "csv", "jsonl"]

#: Table formats, chosen by extension (``.parquet``, ``.tsv``, ``.csv``, ``.jsonl``).
TABLE_FORMATS: tuple[str, ...] = ("parquet", "tsv", "csv", "jsonl")
_TABLE_EXTENSIONS = {".parquet": "parquet", ".tsv": "tsv", ".csv": "csv", ".jsonl": "jsonl"}
_FASTA_FORBIDDEN = re.compile(r"[\s>]")


# --------------------------------------------------------------------------- atomic files


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


class AtomicTarget:
    """A temp file beside ``path``: :meth:`commit` renames it onto ``path``, :meth:`discard`
    removes it. Dropped without either (garbage collected), it is removed.

    Use it instead of :func:`atomic_path` when several files must all be complete before any of
    them is renamed (a VCF and its index): write every temp file, then commit them in order.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        while True:
            tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.tmp")
            try:
                # 0o666 through the umask: the result gets the permissions a plain open() would give.
                os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
                break
            except FileExistsError:
                continue
        self.tmp = tmp
        self._cleanup = weakref.finalize(self, _remove_quietly, str(tmp))

    def commit(self) -> None:
        try:
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)  # data on disk before the rename makes it visible
            finally:
                os.close(fd)
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        self._cleanup.detach()
        with contextlib.suppress(OSError):  # persist the rename itself; not possible everywhere
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def discard(self) -> None:
        self._cleanup()


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temp path in ``path``'s directory; on success it replaces ``path``, on error it is
    removed and ``path`` is untouched. Write to the yielded path and close it inside the block."""
    target = AtomicTarget(path)
    try:
        yield target.tmp
    except BaseException:
        target.discard()
        raise
    target.commit()


# --------------------------------------------------------------------------- FASTA


def _fasta_fields(item: object, n: int) -> tuple[str, str, str]:
    if isinstance(item, SequenceRecord):
        ident, seq, desc = item.id, item.sequence, item.description
    elif isinstance(item, tuple) and len(item) in (2, 3):
        ident, seq = item[0], item[1]
        desc = item[2] if len(item) == 3 else ""
    else:
        raise TypeError(
            f"record {n + 1}: expected a SequenceRecord or an (id, sequence) tuple, got {type(item).__name__}"
        )
    if not isinstance(ident, str) or not ident or any(c.isspace() for c in ident):
        raise ValueError(f"record {n + 1}: id must be a non-empty string without whitespace, got {ident!r}")
    if not isinstance(seq, str):
        raise TypeError(f"record {n + 1} ({ident!r}): sequence must be a str, got {type(seq).__name__}")
    bad = _FASTA_FORBIDDEN.search(seq)
    if bad is not None:
        raise ValueError(
            f"record {n + 1} ({ident!r}): sequence holds {bad.group()!r} at position {bad.start() + 1}"
        )
    if "\n" in desc or "\r" in desc:
        raise ValueError(f"record {n + 1} ({ident!r}): description must be one line")
    return ident, seq, desc


def _fasta_entry(ident: str, seq: str, desc: str, width: int) -> str:
    header = f">{ident} {desc}" if desc else f">{ident}"
    if width <= 0 or len(seq) <= width:
        lines = [seq] if seq else []
    else:
        lines = [seq[i : i + width] for i in range(0, len(seq), width)]
    return "\n".join([header, *lines]) + "\n"


def write_fasta(
    path: PathLike,
    records: Iterable[tuple[str, str] | tuple[str, str, str] | SequenceRecord],
    line_width: int = 60,
) -> int:
    """Write FASTA atomically and return the number of records; ``line_width <= 0`` means one line.

    Records are :class:`SequenceRecord`s or ``(id, sequence[, description])`` tuples; an empty or
    whitespace-holding id, or whitespace/``>`` in a sequence, raises (it would not read back the
    same). A name ending in ``.gz`` is written BGZF (gzip-compatible, indexable by ``samtools
    faidx``/``pysam.FastaFile``).
    """
    if not isinstance(line_width, int) or isinstance(line_width, bool):
        raise TypeError(f"line_width must be an int, got {line_width!r}")
    n = 0
    with atomic_path(path) as tmp:
        if os.fspath(path).lower().endswith(".gz"):
            import pysam

            out: Any = pysam.BGZFile(str(tmp), "wb")
        else:
            out = open(tmp, "wb")  # noqa: SIM115 - closed below, error path included
        with out:
            for n, item in enumerate(records, 1):
                out.write(_fasta_entry(*_fasta_fields(item, n - 1), line_width).encode("utf-8"))
    return n


# --------------------------------------------------------------------------- tables


def table_format(path: PathLike, format: str | None = None) -> TableFormat:
    """The table format named by ``format`` or implied by the extension of ``path``."""
    if format is None:
        format = _TABLE_EXTENSIONS.get(os.path.splitext(os.fspath(path))[1].lower())
        if format is None:
            raise ValueError(
                f"cannot tell the table format of {os.fspath(path)!r}; "
                f"supported extensions: {', '.join(_TABLE_EXTENSIONS)}"
            )
    if format not in TABLE_FORMATS:
        raise ValueError(f"unknown table format {format!r}; supported: {', '.join(TABLE_FORMATS)}")
    return format  # type: ignore[return-value]


def _plain(value: Any) -> Any:
    """Torch tensors and numpy arrays/scalars -> Python values (lists for arrays)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor, without importing torch
        value = value.detach().cpu()
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def _arrow_value(value: Any) -> Any:
    """Like :func:`_plain`, but 1-D numpy arrays stay arrays (pyarrow converts them in bulk)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    if getattr(value, "ndim", None) == 1 and hasattr(value, "dtype"):
        return value
    return _plain(value)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _cell(value: Any) -> str:
    value = _plain(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        if all(_is_number(x) for x in value):
            return ",".join(format(x, ".6g") if isinstance(x, float) else str(x) for x in value)
        return json.dumps(value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _json_value(value: Any) -> Any:
    value = _plain(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # strict JSON has no NaN/Infinity
    return value


def _check_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i + 1}: expected a mapping of column -> value, got {type(row).__name__}")


def _columns_of(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Union of the rows' keys, in order of first appearance (a key missing from a row is null)."""
    return list(dict.fromkeys(k for row in rows for k in row))


def _arrow_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema | None) -> pa.Table:
    import pyarrow as pa

    columns = _columns_of(rows)
    if schema is not None:
        unknown = [c for c in columns if c not in schema.names]
        if unknown:
            raise ValueError(f"column(s) {unknown} are not in the table's columns {schema.names}")
        columns = list(schema.names)
    arrays = []
    for name in columns:
        values = [_arrow_value(row.get(name)) for row in rows]
        try:
            array = pa.array(values)
            if schema is not None and array.type != schema.field(name).type:
                array = array.cast(schema.field(name).type)  # safe cast: refuses 1.5 -> int64
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
            fit = (
                f" do not fit type {schema.field(name).type} (taken from the first batch unless schema= was given)"
                if schema is not None
                else " cannot be stored as one Arrow type"
            )
            raise ValueError(f"column {name!r}: values{fit}: {exc}") from exc
        arrays.append(array)
    if schema is not None:
        return pa.Table.from_arrays(arrays, schema=schema)
    return pa.Table.from_arrays(arrays, names=columns)


class TableWriter:
    """Stream rows into one table file, committed atomically by :meth:`close`.

    Use as a context manager: leaving the block normally commits, an exception leaves nothing at
    the destination. Columns (and, for Parquet, their types) are fixed by ``schema`` or else by
    the first non-empty batch; a later row with an unknown column raises, a missing one is null.
    A batch that raises is not written, so it is all-or-nothing. JSONL rows are written as given.

    With ``deferred=True``, :meth:`close` finishes the temp file but leaves the destination alone
    until :meth:`commit` (or :meth:`abort`), so it can be published together with other files.
    """

    def __init__(
        self,
        path: PathLike,
        *,
        format: str | None = None,
        schema: pa.Schema | None = None,
        deferred: bool = False,
    ) -> None:
        self.path = Path(path)
        self._deferred = deferred
        self.format: TableFormat = table_format(path, format)
        self.rows_written = 0
        self._schema = schema
        self._columns: list[str] | None = list(schema.names) if schema is not None else None
        self._target = AtomicTarget(path)
        self._finished = False
        self._parquet: Any = None
        self._text: IO[str] | None = None
        self._closed = False
        self._header_written = False
        if self.format != "parquet":
            try:
                self._text = open(self._target.tmp, "w", encoding="utf-8", newline="")  # noqa: SIM115
            except BaseException:
                self._target.discard()
                raise

    # -- context manager
    def __enter__(self) -> TableWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write_batch(self, rows: Sequence[Mapping[str, Any]] | pa.Table | pa.RecordBatch) -> None:
        """Append rows (a list of dicts or a pyarrow Table/RecordBatch)."""
        if self._closed:
            raise ValueError(f"TableWriter for {os.fspath(self.path)!r} is closed")
        if self.format == "parquet":
            self._write_parquet(rows)
            return
        if hasattr(rows, "to_pylist"):
            rows = rows.to_pylist()  # type: ignore[union-attr]
        _check_rows(rows)  # type: ignore[arg-type]
        if not rows:
            return
        assert self._text is not None
        if self.format == "jsonl":
            lines = [
                json.dumps(_json_value(dict(row)), ensure_ascii=False, allow_nan=False) + "\n" for row in rows
            ]  # type: ignore[union-attr]
            self._text.write("".join(lines))
        else:
            self._write_delimited(rows)  # type: ignore[arg-type]
        self.rows_written += len(rows)

    def _write_delimited(self, rows: Sequence[Mapping[str, Any]]) -> None:
        first = not self._header_written
        columns = _columns_of(rows) if self._columns is None else self._columns
        assert columns is not None
        if self._columns is not None:
            known = set(columns)
            for i, row in enumerate(rows):
                unknown = [k for k in row if k not in known]
                if unknown:
                    raise ValueError(
                        f"row {i + 1}: column(s) {unknown} are not in the table's columns {columns}"
                    )
        # Format the whole batch before writing any of it, so a bad value leaves no partial batch.
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="\t" if self.format == "tsv" else ",", lineterminator="\n")
        if first:
            writer.writerow(columns)
        writer.writerows([_cell(row.get(c)) for c in columns] for row in rows)
        assert self._text is not None
        self._text.write(buffer.getvalue())
        self._columns = columns
        self._header_written = True

    def _write_parquet(self, rows: Sequence[Mapping[str, Any]] | pa.Table | pa.RecordBatch) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if isinstance(rows, pa.RecordBatch):
            rows = pa.Table.from_batches([rows])
        if isinstance(rows, pa.Table):
            table = rows
            if self._schema is not None and not table.schema.equals(self._schema):
                try:
                    table = table.select(self._schema.names).cast(self._schema)
                except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
                    raise ValueError(f"table does not match the columns {self._schema}: {exc}") from exc
        else:
            _check_rows(rows)
            if not rows:
                return
            table = _arrow_table(rows, self._schema)
        if table.num_rows == 0 and self._schema is None:
            return
        if self._parquet is None:
            self._schema = table.schema
            self._parquet = pq.ParquetWriter(str(self._target.tmp), table.schema)
        self._parquet.write_table(table)
        self.rows_written += table.num_rows

    def close(self) -> None:
        """Finish the file and move it onto the destination (idempotent)."""
        if self._closed:
            return
        try:
            if self.format == "parquet" and self._parquet is None:
                import pyarrow as pa
                import pyarrow.parquet as pq

                # No rows: still a valid Parquet file, with the columns when they are known.
                self._parquet = pq.ParquetWriter(str(self._target.tmp), self._schema or pa.schema([]))
            if self.format in ("tsv", "csv") and not self._header_written and self._columns is not None:
                self._write_delimited([])  # no rows, but the columns are known: header only
            self._close_handles()
        except BaseException:
            self.abort()
            raise
        self._closed = True
        if not self._deferred:
            self._finished = True
            self._target.commit()

    def commit(self) -> None:
        """``deferred=True``: move the closed file onto the destination (idempotent)."""
        if not self._closed:
            self.close()
        if not self._finished:
            self._finished = True
            self._target.commit()

    def abort(self) -> None:
        """Drop everything not yet committed; the destination is left as it was (idempotent)."""
        if self._finished:
            return
        self._closed = self._finished = True
        with contextlib.suppress(Exception):
            self._close_handles()
        self._target.discard()

    def __del__(self) -> None:
        # Never closed: the output was never confirmed complete, so it is not committed.
        if not getattr(self, "_finished", True):
            warnings.warn(
                f"TableWriter for {os.fspath(self.path)!r} was never closed (or committed); its output was discarded",
                ResourceWarning,
                stacklevel=2,
            )
            self.abort()

    def _close_handles(self) -> None:
        if self._parquet is not None:
            writer, self._parquet = self._parquet, None
            writer.close()
        if self._text is not None:
            text, self._text = self._text, None
            text.close()


def write_table(
    path: PathLike, rows: Sequence[Mapping[str, Any]] | pa.Table, *, format: str | None = None
) -> None:
    """Write a whole table atomically; the format comes from the extension unless given.

    Rows are dicts (columns = union of their keys, in first-seen order) or a pyarrow Table.
    """
    with TableWriter(path, format=format) as writer:
        writer.write_batch(rows)
