"""Write VEP result rows as a table (``.parquet``, ``.tsv``, ``.csv``, ``.jsonl``).

One row per (record, ALT) with the columns :data:`~hexamer.vep.scoring.ROW_COLUMNS`, in input
order, plus chosen INFO fields of the input (:func:`resolve_info_fields`) as ``info_<id>``
columns. Presorted rows are streamed in batches of :data:`TABLE_BATCH_ROWS`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import IO, TYPE_CHECKING, Any

from hexamer.io import TableWriter, table_format
from hexamer.io.vcf.header import complete_header
from hexamer.io.vcf.reader import open_variant_file, read_vcf
from hexamer.io.vcf.records import VcfRecord
from hexamer.vep.rows import ordered_rows, row_schema

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "INFO_COLUMN_PREFIX",
    "TABLE_BATCH_ROWS",
    "InfoField",
    "join_info",
    "join_kept_info",
    "keep_info",
    "resolve_info_fields",
    "write_rows",
]

PathLike = str | os.PathLike[str]

#: Rows per batch (and Parquet row group) when a table is written.
TABLE_BATCH_ROWS = 16_384

INFO_COLUMN_PREFIX = "info_"


@dataclass(frozen=True)
class InfoField:
    """One INFO field of the input carried into table outputs as the column ``info_<id>``."""

    id: str
    number: str
    type: str

    @property
    def column(self) -> str:
        return INFO_COLUMN_PREFIX + self.id

    @property
    def per_allele(self) -> bool:
        """Number=A or R: a row gets the value of its own ALT allele."""
        return self.number in ("A", "R")

    def arrow_type(self) -> pa.DataType:
        import pyarrow as pa

        if self.type == "Flag":
            return pa.bool_()
        if self.number not in ("1", "A", "R"):
            return pa.string()  # several values: comma-joined, as in the VCF
        return {"Integer": pa.int64(), "Float": pa.float64()}.get(self.type, pa.string())

    def value(self, rec: Any, alt_index: int) -> Any:
        """This field of a pysam record for the row of ALT ``alt_index`` (None when absent).
        A value that is not UTF-8 text raises ``UnicodeDecodeError`` (:func:`join_info` fails
        its rows): an empty cell would pass for a record without the field."""
        try:
            if self.type == "Flag":
                return self.id in rec.info
            if self.id not in rec.info:
                return None
            value = rec.info[self.id]
        except UnicodeDecodeError:
            raise
        except (ValueError, KeyError, TypeError, OSError):
            return None
        if isinstance(value, tuple):
            if self.per_allele:
                i = alt_index + (self.number == "R")
                return value[i] if 0 <= i < len(value) else None
            return ",".join("." if v is None else str(v) for v in value)
        if self.number not in ("1", "A", "R") and value is not None:
            return str(value)
        return value


def resolve_info_fields(vcf_in: PathLike, fields: str | Iterable[str] | None) -> list[InfoField]:
    """The INFO fields named by ``fields`` (names, one comma-separated string, or ``"all"``) as
    declared by the header of ``vcf_in``; a field its records use without declaring it is a
    String. An unknown name raises ``ValueError`` naming the file and the fields it has, so a
    typo fails before any scoring. ``all`` and undeclared names cost one read of the input."""
    if fields is None:
        return []
    names = [n.strip() for n in (fields.split(",") if isinstance(fields, str) else fields)]
    names = [n for n in dict.fromkeys(names) if n]
    with open_variant_file(vcf_in) as source:
        declared = {key: (str(meta.number), str(meta.type)) for key, meta in source.header.info.items()}
    if names == ["all"] or any(n not in declared for n in names):
        header, _, _ = complete_header(vcf_in)
        declared = {key: (str(meta.number), str(meta.type)) for key, meta in header.info.items()}
    if names == ["all"]:
        names = list(declared)
    unknown = [n for n in names if n not in declared]
    if unknown:
        shown = ", ".join(declared) or "none"
        raise ValueError(
            f"{os.fspath(vcf_in)}: no INFO field {', '.join(unknown)} (its INFO fields: {shown})"
        )
    return [InfoField(n, *declared[n]) for n in names]


def join_info(
    rows: Iterable[Mapping[str, Any]], vcf_in: PathLike, fields: Iterable[InfoField]
) -> Iterator[dict[str, Any]]:
    """Rows (sorted by record) with the ``info_*`` columns of their input record, read alongside.

    A chosen field whose value is not UTF-8 text, or not a number where the header declares an
    Integer or Float (htslib reads ``AF=high`` as missing and ``DP=12x`` as 12), makes the row
    ``failed``, its reason naming the line and the field, as a record with such bytes in its
    other fields is (docs/vep.md): its cell cannot be filled, and an empty one would read as "the
    record has no such field"."""
    fields = list(fields)
    return _join(rows, _captured(read_vcf(vcf_in, keep_records=True), fields), fields)


def keep_info(
    records: Iterable[VcfRecord], fields: Iterable[InfoField], sink: IO[bytes]
) -> Iterator[VcfRecord]:
    """``records`` (read with ``keep_records``) passed on without their pysam records, the chosen
    INFO fields of each written to ``sink`` as they pass, one JSON line per record (values are
    None, flags, numbers, NaN and infinities included, or text; never pickled: a sidecar is data,
    not code): the pass that scores the input keeps what :func:`join_kept_info` needs, so the input
    is not read again for them."""
    fields = list(fields)
    numeric = [f for f in fields if f.type in ("Integer", "Float")]
    for record in records:
        sink.write(json.dumps(_capture(record, fields, numeric)).encode() + b"\n")
        yield dataclasses.replace(record, record=None, text=None)


def join_kept_info(
    rows: Iterable[Mapping[str, Any]], kept: PathLike, fields: Iterable[InfoField]
) -> Iterator[dict[str, Any]]:
    """:func:`join_info` from the values :func:`keep_info` wrote to the file ``kept``."""

    def entries() -> Iterator[_Kept]:
        with open(kept, "rb") as f:
            for line in f:
                index, malformed, per_alt = json.loads(line)
                yield index, malformed, [(values, fail) for values, fail in per_alt]

    return _join(rows, entries(), list(fields))


#: a record's INFO values as the table needs them: its index, the reason its numbers fail (or
#: None), and per ALT index the values of the fields and the reason they fail (or None)
_Kept = tuple[int, "str | None", list[tuple[list[Any], "str | None"]]]


def _captured(records: Iterable[VcfRecord], fields: list[InfoField]) -> Iterator[_Kept]:
    numeric = [f for f in fields if f.type in ("Integer", "Float")]
    for record in records:
        yield _capture(record, fields, numeric)


def _capture(record: VcfRecord, fields: list[InfoField], numeric: list[InfoField]) -> _Kept:
    malformed = malformed_number(record, numeric) if numeric else None
    per_alt: list[tuple[list[Any], str | None]] = []
    for alt_index in range(max(1, len(record.alts))):
        values: list[Any] = []
        fail: str | None = None
        for field in fields:
            value = None
            if record.record is not None:
                try:
                    value = field.value(record.record, alt_index)
                except UnicodeDecodeError as exc:
                    fail = _undecodable_info(record, field, exc)  # the last one named, as before
            values.append(value)
        per_alt.append((values, fail))
    return record.index, malformed, per_alt


def _join(
    rows: Iterable[Mapping[str, Any]], kept: Iterator[_Kept], fields: list[InfoField]
) -> Iterator[dict[str, Any]]:
    current: _Kept | None = None
    for row in rows:
        while current is None or current[0] < row["record"]:
            current = next(kept, None)
            if current is None:
                break
        found = current if current is not None and current[0] == row["record"] else None
        out = dict(row)
        for field in fields:
            out[field.column] = None
        alt = int(row["alt_index"])
        if found is not None and 0 <= alt < len(found[2]):
            values, fail = found[2][alt]
            out.update(zip((f.column for f in fields), values, strict=True))
            if fail is not None:
                _fail(out, fail)
        if found is not None and found[1] is not None and out.get("status") != "failed":
            _fail(out, found[1])
        yield out


def _fail(row: dict[str, Any], reason: str) -> None:
    row.update(status="failed", score=None, n_scored_bp=None, n_oov_bp=None, reason=reason)


def _where(record: VcfRecord) -> str:
    return f"line {record.line}" if record.line is not None else f"record {record.chrom}:{record.pos}"


def _undecodable_info(record: VcfRecord, field: InfoField, error: UnicodeDecodeError) -> str:
    byte = f"0x{error.object[error.start]:02x}" if error.start < len(error.object) else "?"
    return f"malformed VCF {_where(record)}: INFO field {field.id} holds byte {byte}, not UTF-8 text"


_NUMBER = {
    "Integer": re.compile(r"[+-]?[0-9]+"),
    "Float": re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.I),
}


def malformed_number(record: VcfRecord, fields: Iterable[InfoField]) -> str | None:
    """Why ``record``'s line holds a value of an Integer or Float field of ``fields`` that is not a
    number (``.`` is missing, not malformed), or None. Read from the line as written
    (``record.text``): htslib reads ``AF=high`` as missing and ``DP=12x`` as 12, so pysam's value
    cannot tell. A record without its text (BCF, whose values are typed) is never malformed."""
    if record.text is None:
        return None
    info = record.text.rstrip("\r\n").split("\t")[7:8]
    if not info or info[0] == ".":
        return None
    raw = dict(item.partition("=")[::2] for item in info[0].split(";"))
    for field in fields:
        values = raw.get(field.id)
        if not values:
            continue
        for value in values.split(","):
            if value != "." and not _NUMBER[field.type].fullmatch(value):
                return (
                    f"malformed VCF {_where(record)}: INFO field {field.id} value {value!r} is not "
                    f"{'an' if field.type == 'Integer' else 'a'} {field.type}"
                )
    return None


def write_rows(
    path: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    presorted: bool = False,
    vcf_in: PathLike | None = None,
    info: Iterable[InfoField] = (),
    calibrated: bool = False,
    extra_columns: Sequence[str] = (),
) -> int:
    """Write result rows as a table (format by extension), in input order; returns the row count.

    With ``presorted=True`` the rows must already be sorted by ``(record, alt_index)`` (else
    ``ValueError``, and nothing is written) and are streamed in batches of
    :data:`TABLE_BATCH_ROWS`; otherwise they are sorted in memory first. ``info`` fields (from
    :func:`resolve_info_fields`) of the input ``vcf_in`` are added as ``info_<id>`` columns by
    :func:`join_info`; without ``vcf_in`` the rows carry those columns already (a job that counts
    its rows joins them first, so that a row failed by the join is counted as failed).
    ``calibrated`` adds the rows' ``phred`` column; ``extra_columns`` are float64 columns the rows
    carry after the standard ones (a fine-tuned head's effect per output).
    """
    import pyarrow as pa

    info = list(info)
    ordered: Iterator[Mapping[str, Any]] = ordered_rows(rows, presorted)
    schema = row_schema(extra_columns)
    if calibrated:
        schema = schema.append(pa.field("phred", pa.float64()))
    if info:
        if vcf_in is not None:
            ordered = join_info(ordered, vcf_in, info)
        schema = pa.schema([*schema, *(pa.field(f.column, f.arrow_type()) for f in info)])
    columns = schema.names
    n = 0
    with TableWriter(path, format=table_format(path), schema=schema) as writer:
        while batch := [{c: row.get(c) for c in columns} for row in islice(ordered, TABLE_BATCH_ROWS)]:
            writer.write_batch(batch)
            n += len(batch)
    return n
