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
    "InfoKeeper",
    "InfoRequest",
    "info_fields_note",
    "join_info",
    "request_info_fields",
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
        if self.id == "END":  # pysam hides END (it answers with ``rec.stop``, also without one)
            return self._end(rec)
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

    def _end(self, rec: Any) -> Any:
        """``END`` as the record holds it (None without one), read from the record as htslib
        writes it: ``rec.info`` never has it, and ``rec.stop`` is REF's end when it is absent."""
        from pysam.libcutils import get_encoding_error_handler, set_encoding_error_handler

        old = get_encoding_error_handler()
        set_encoding_error_handler("surrogateescape")  # bytes of other fields are not this field's
        try:
            columns = str(rec).rstrip("\r\n").split("\t")
        except (ValueError, OSError):
            return None
        finally:
            set_encoding_error_handler(old)
        info = columns[7].split(";") if len(columns) > 7 else []
        raw = next((item[4:] for item in info if item.startswith("END=")), None)
        if raw is None or raw == ".":
            return None
        raw.encode("utf-8", "surrogateescape").decode("utf-8")  # not UTF-8 text: UnicodeDecodeError
        if self.number == "1" and self.type in ("Integer", "Float"):
            try:
                return int(raw) if self.type == "Integer" else float(raw)
            except ValueError:
                return None  # not a number: the row fails (:func:`malformed_number`)
        return raw


@dataclass(frozen=True)
class InfoRequest:
    """The INFO fields a job was asked for (``--info-fields``), as far as the input's header tells
    before any record is read: the columns are decided by :meth:`columns` once the records were
    read (htslib declares a tag the records use without declaring it as it meets it)."""

    #: the input, named in errors
    source: str
    #: the names asked for, in order; None: every field
    names: tuple[str, ...] | None
    #: the fields the header declares that are kept: those named, or every one
    declared: tuple[InfoField, ...]

    @property
    def undeclared(self) -> tuple[str, ...]:
        """Names the header does not declare: a record may use them (a String), or none does."""
        known = {f.id for f in self.declared}
        return tuple(n for n in self.names or () if n not in known)

    def columns(self, header: Any) -> list[InfoField]:
        """The chosen fields as ``header`` declares them once the records were read (every
        declared field in its order for ``all``, else the names in their order); a name it does
        not declare raises ``ValueError`` naming the file and the fields it has."""
        declared = {key: (str(meta.number), str(meta.type)) for key, meta in header.info.items()}
        names = list(declared) if self.names is None else list(self.names)
        unknown = [n for n in names if n not in declared]
        if unknown:
            shown = ", ".join(declared) or "none"
            raise ValueError(f"{self.source}: no INFO field {', '.join(unknown)} (its INFO fields: {shown})")
        return [InfoField(n, *declared[n]) for n in names]


def request_info_fields(vcf_in: PathLike, fields: str | Iterable[str] | None) -> InfoRequest | None:
    """The INFO fields named by ``fields`` (names, one comma-separated string, or ``"all"``; None or
    no name: None), reading the header of ``vcf_in`` only."""
    if fields is None:
        return None
    names = [n.strip() for n in (fields.split(",") if isinstance(fields, str) else fields)]
    names = [n for n in dict.fromkeys(names) if n]
    if not names:
        return None
    with open_variant_file(vcf_in) as source:
        return _request(os.fspath(vcf_in), names, source.header)


def info_fields_note(request: InfoRequest) -> str:
    """What a job says before scoring about the names its input's header does not declare."""
    names = request.undeclared
    return (
        f"{request.source}: the header declares no INFO field {', '.join(names)}; the records are "
        f"searched for {'it' if len(names) == 1 else 'them'} as they are scored (a name no record "
        "uses fails when the table is written, with the scores kept for a resumed run)"
    )


def _request(source: str, names: list[str], header: Any) -> InfoRequest:
    every = names == ["all"]
    declared = {key: (str(meta.number), str(meta.type)) for key, meta in header.info.items()}
    kept = list(declared) if every else [n for n in names if n in declared]
    return InfoRequest(
        source, None if every else tuple(names), tuple(InfoField(n, *declared[n]) for n in kept)
    )


def resolve_info_fields(vcf_in: PathLike, fields: str | Iterable[str] | None) -> list[InfoField]:
    """The INFO fields named by ``fields`` (names, one comma-separated string, or ``"all"``) as
    declared by the header of ``vcf_in``; a field its records use without declaring it is a
    String. An unknown name raises ``ValueError`` naming the file and the fields it has. ``all``
    and undeclared names cost one read of the input (a job learns them from its one pass instead:
    :class:`InfoKeeper`)."""
    request = request_info_fields(vcf_in, fields)
    if request is None:
        return []
    if request.names is not None and not request.undeclared:
        return list(request.declared)
    header, _, _ = complete_header(vcf_in)
    return request.columns(header)


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


class InfoKeeper:
    """The INFO values a table's ``info_*`` columns take, kept by the pass that scores the input so
    that it is read once: one JSON line per record (values are None, flags, numbers, NaN and
    infinities included, or text; never pickled: a sidecar is data, not code). The fields the
    header declares are kept from the first record; a tag the records use without declaring it
    (which htslib declares as it meets it) is learnt where it first appears, so a line holds the
    values of the fields known when it was written. The columns are decided when the table is
    written (:meth:`join`), from the header htslib holds after the pass."""

    def __init__(self, request: InfoRequest) -> None:
        self.request = request
        #: the fields kept so far, in the order of a line's values
        self.fields: list[InfoField] = list(request.declared)
        #: undeclared names still looked for; None: every tag a record uses
        self._wanted: list[str] | None = None if request.names is None else list(request.undeclared)

    def keep(self, records: Iterable[VcfRecord], sink: IO[bytes]) -> Iterator[VcfRecord]:
        """``records`` (read with ``keep_records``) passed on without their pysam records, the
        values of each written to ``sink`` as they pass."""
        known = {f.id for f in self.fields}
        numeric = [f for f in self.fields if f.type in ("Integer", "Float")]
        declared = -1  # the INFO fields the header declared when it was last looked at
        for record in records:
            if record.record is not None and self._wanted != []:
                header = record.record.header
                # htslib declares a tag as it meets it: a record that used a new one grew the header
                if len(header.info) != declared:
                    declared = len(header.info)
                    for new in self._learn(header, known):
                        self.fields.append(new)
                        known.add(new.id)
                        if new.type in ("Integer", "Float"):
                            numeric.append(new)
            sink.write(json.dumps(_capture(record, self.fields, numeric)).encode() + b"\n")
            yield dataclasses.replace(record, record=None, text=None)

    def _learn(self, header: Any, known: set[str]) -> list[InfoField]:
        """The fields ``header`` declares now that are looked for and not kept yet."""
        try:
            if self._wanted is None:
                keys = [k for k in header.info if k not in known]
            else:
                keys = [k for k in self._wanted if k in header.info]
                self._wanted = [k for k in self._wanted if k not in keys]
            return [InfoField(k, str(header.info[k].number), str(header.info[k].type)) for k in keys]
        except (UnicodeDecodeError, ValueError, KeyError, OSError):
            return []  # a tag htslib cannot name: its column stays empty, as a second read leaves it

    def join(
        self, rows: Iterable[Mapping[str, Any]], kept: PathLike, header: Any
    ) -> tuple[list[InfoField], Iterator[dict[str, Any]]]:
        """``(columns, rows)``: the chosen fields as ``header`` (the input's, after the pass)
        declares them (:meth:`InfoRequest.columns`, which raises ``ValueError`` for a name no
        record used) and the rows with those columns, from the values :meth:`keep` wrote to the
        file ``kept``, as :func:`join_info` fills them by reading the input again."""
        columns = self.request.columns(header)
        at = {f.id: i for i, f in enumerate(columns)}
        where = [at.get(f.id) for f in self.fields]

        def entries() -> Iterator[_Kept]:
            with open(kept, "rb") as f:
                for line in f:
                    index, malformed, per_alt = json.loads(line)
                    yield index, malformed, [_placed(v, fails, where, len(columns)) for v, fails in per_alt]

        return columns, _join(rows, entries(), columns)


#: a record's INFO values as the table needs them: its index, the reason its numbers fail (or
#: None), and per ALT index the values of the columns and the reason they fail (or None)
_Kept = tuple[int, "str | None", list[tuple[list[Any], "str | None"]]]
#: per ALT index as captured: the values of the fields kept, and ``[position, reason]`` of each
#: value that is not UTF-8 text (or None)
_Captured = tuple[int, "str | None", list[tuple[list[Any], "list[list[Any]] | None"]]]


def _placed(
    values: list[Any], fails: list[list[Any]] | None, where: list[int | None], n: int
) -> tuple[list[Any], str | None]:
    """Captured values in column order (``where``: the column of each kept field, None for one
    that is no column); the reason is the failing field's in the last column, as a read names it."""
    out: list[Any] = [None] * n
    # a line is shorter than `where` when fields were learnt after it was written
    for value, column in zip(values, where, strict=False):
        if column is not None:
            out[column] = value
    placed = [(where[i], reason) for i, reason in fails or () if where[i] is not None]
    return out, max(placed)[1] if placed else None


def _captured(records: Iterable[VcfRecord], fields: list[InfoField]) -> Iterator[_Kept]:
    numeric = [f for f in fields if f.type in ("Integer", "Float")]
    identity: list[int | None] = list(range(len(fields)))
    for record in records:
        index, malformed, per_alt = _capture(record, fields, numeric)
        yield index, malformed, [_placed(v, fails, identity, len(fields)) for v, fails in per_alt]


def _capture(record: VcfRecord, fields: list[InfoField], numeric: list[InfoField]) -> _Captured:
    malformed = malformed_number(record, numeric) if numeric else None
    per_alt: list[tuple[list[Any], list[list[Any]] | None]] = []
    for alt_index in range(max(1, len(record.alts))):
        values: list[Any] = []
        fails: list[list[Any]] = []
        for position, field in enumerate(fields):
            value = None
            if record.record is not None:
                try:
                    value = field.value(record.record, alt_index)
                except UnicodeDecodeError as exc:
                    fails.append([position, _undecodable_info(record, field, exc)])
            values.append(value)
        per_alt.append((values, fails or None))
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
