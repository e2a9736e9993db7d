"""Sequence input: FASTA/FASTQ (plain, gzip, bgzip), one sequence per line, and id/sequence tables.

A scoring job over thousands of sequences must not die on one bad record, and must not silently
score a file that is not what its name says. So there are two kinds of problem:

* a bad *record* (missing id, duplicate id, empty sequence, a character that is not an IUPAC
  nucleotide code) comes out as a :class:`BadRecord` in the same stream, in input order, and every
  other record is still read (``on_error="raise"`` turns the first one into an exception instead);
* a bad *file* (missing, binary, not the format its name says, truncated, a table without the
  ``id``/``sequence`` columns) raises :class:`SequenceInputError` naming the path and, when known,
  the line or record.

Sequences are returned as given except that whitespace is removed: case is kept (the tokenizer
folds it) and ``U`` is kept (it is a valid code, RNA input). The tokenizer sends every 6-mer chunk
holding anything but ``ACGT`` to ``<oov>``, so callers that feed a model pass the sequence through
:func:`normalize_sequence`, which maps ``U``->``T``; :func:`count_non_acgt` then tells how many
bases will still land in ``<oov>`` chunks (``N`` and the other ambiguity codes).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import re
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Literal, NamedTuple

from hexamer.io.stdio import spool_stdin

__all__ = [
    "IUPAC_CODES",
    "SEQUENCE_FORMATS",
    "BadRecord",
    "SequenceInputError",
    "SequenceRecord",
    "count_non_acgt",
    "normalize_sequence",
    "read_sequences",
    "reverse_complement",
    "sequence_format",
]

PathLike = str | os.PathLike[str]
OnError = Literal["report", "raise"]
SequenceFormat = Literal["fasta", "txt", "tsv", "csv", "parquet"]

#: Characters accepted in a sequence (either case): the IUPAC nucleotide codes, U included.
IUPAC_CODES = "ACGTUNRYKMSWBDHV"
#: Input formats; "fasta" also reads FASTQ (pysam tells them apart by the first character).
SEQUENCE_FORMATS: tuple[str, ...] = ("fasta", "txt", "tsv", "csv", "parquet")

_INVALID_CHAR = re.compile(f"[^{IUPAC_CODES}{IUPAC_CODES.lower()}]")
_U_TO_T = str.maketrans("Uu", "Tt")
_ACGT = "ACGTacgt"
_GZIP_MAGIC = b"\x1f\x8b"
_SNIFF_BYTES = 1 << 16
_REQUIRED_COLUMNS = ("id", "sequence")
_EXTENSIONS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".csv": "csv",
    ".txt": "txt",
}
_COMPRESSION_SUFFIXES = (".gz", ".bgz", ".bgzf")
_TRUNCATED_FASTQ = "truncated FASTQ record: no '+' and quality lines after the sequence"
_TRUNCATED_FASTQ_QUALITY = "truncated FASTQ record: the file ends inside its quality line"


class SequenceInputError(ValueError):
    """The input cannot be read (or, with ``on_error="raise"``, holds a bad record).

    The message reads ``PATH: line N: record M: reason`` with the parts that are known; the parts
    are also attributes so a CLI can format them its own way.
    """

    def __init__(self, path: str, reason: str, line: int | None = None, record: int | None = None) -> None:
        self.path = path
        self.reason = reason
        self.line = line
        self.record = record
        parts = [path]
        if line is not None:
            parts.append(f"line {line}")
        if record is not None:
            parts.append(f"record {record}")
        super().__init__(": ".join([*parts, reason]))

    def __reduce__(self) -> tuple[type, tuple[str, str, int | None, int | None]]:
        # Keeps the exception picklable (multiprocessing) despite the custom signature.
        return (type(self), (self.path, self.reason, self.line, self.record))


@dataclass(slots=True)
class SequenceRecord:
    """One good input sequence. ``index`` is its 0-based position among all input records (bad
    ones included), so results and :class:`BadRecord` reports can be put back in input order."""

    id: str
    sequence: str
    description: str = ""
    index: int = 0


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that was skipped, and why; ``index`` counts like :attr:`SequenceRecord.index`."""

    index: int
    id: str
    reason: str

    def __str__(self) -> str:
        return f"record {self.index + 1} ({self.id!r}): {self.reason}"


class _Raw(NamedTuple):
    """A record as parsed, before validation; ``problem`` is set when the parser already knows."""

    index: int
    id: str
    sequence: str
    description: str = ""
    line: int | None = None
    problem: str | None = None


def normalize_sequence(seq: str, *, rna_to_dna: bool = True) -> str:
    """Remove all whitespace and, by default, map ``U``/``u`` to ``T``/``t`` (case kept).

    Call this before tokenizing: the tokenizer turns any chunk containing ``U`` into ``<oov>``, and
    an RNA sequence is scored as its DNA equivalent.
    """
    seq = "".join(seq.split())
    return seq.translate(_U_TO_T) if rna_to_dna else seq


def count_non_acgt(seq: str) -> int:
    """Number of characters that are not ``A``, ``C``, ``G`` or ``T`` (either case).

    These are the bases the tokenizer cannot encode (``N``, ambiguity codes, ``U`` unless
    normalized); each one sends its whole 6-mer chunk to ``<oov>``.
    """
    return len(seq) - sum(map(seq.count, _ACGT))


_COMPLEMENT = str.maketrans("ACGTRYKMBVDHNSWacgtrykmbvdhnsw", "TGCAYRMKVBHDNSWtgcayrmkvbhdnsw")


def reverse_complement(seq: str) -> str:
    """The reverse complement of DNA: A<->T, C<->G, IUPAC ambiguity codes to their complements
    (R<->Y, K<->M, B<->V, D<->H; N, S, W stay), case kept; any other character stays as it is."""
    return seq.translate(_COMPLEMENT)[::-1]


def sequence_format(path: PathLike) -> SequenceFormat:
    """The input format implied by a file name (``.gz``/``.bgz`` ignored); FASTA/FASTQ otherwise."""
    name = os.fspath(path).lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _EXTENSIONS.get(os.path.splitext(name)[1], "fasta")  # type: ignore[return-value]


def read_sequences(
    path: PathLike, *, on_error: OnError = "report", format: SequenceFormat | None = None
) -> Iterator[SequenceRecord | BadRecord]:
    """Read sequences from FASTA/FASTQ, ``.txt`` (one per line), or a Parquet/TSV/CSV table.

    ``path`` ``-`` reads standard input (FASTA unless ``format`` says otherwise). The format comes
    from the file name (:func:`sequence_format`) unless given. Tables need columns ``id`` and
    ``sequence`` (``description`` is used when present); ``.txt`` records get ids ``line<N>``.

    The file is opened and checked now, so a missing or malformed file raises
    :class:`SequenceInputError` at the call, not at the first ``next``. Records then stream:
    each is a :class:`SequenceRecord` or, for a bad record, a :class:`BadRecord` (with
    ``on_error="raise"``, a :class:`SequenceInputError` instead). A later file-level problem
    (truncated gzip, binary data further in) still raises while iterating.
    """
    if on_error not in ("report", "raise"):
        raise ValueError(f"on_error must be 'report' or 'raise', got {on_error!r}")
    if format is not None and format not in SEQUENCE_FORMATS:
        raise ValueError(f"unknown sequence format {format!r}; supported: {', '.join(SEQUENCE_FORMATS)}")
    if os.fspath(path) == "-":
        raw = _open_stdin(format or "fasta")
        display = "<stdin>"
    else:
        display = os.fspath(path)
        raw = _open_raw(display, display, format or sequence_format(path))
    return _validated(raw, display, on_error)


# --------------------------------------------------------------------------- validation


def _problem(rec: _Raw, first_index: dict[str, int]) -> str | None:
    if rec.problem is not None:
        return rec.problem
    if not rec.id:
        return "missing id"
    if rec.id in first_index:
        return f"duplicate id {rec.id!r} (first seen in record {first_index[rec.id] + 1})"
    if not rec.sequence:
        return "empty sequence"
    bad = _INVALID_CHAR.search(rec.sequence)
    if bad is not None:
        return (
            f"invalid character {bad.group()!r} at position {bad.start() + 1} "
            f"(allowed: IUPAC nucleotide codes {IUPAC_CODES}, either case)"
        )
    return None


def _validated(raw: Iterator[_Raw], display: str, on_error: OnError) -> Iterator[SequenceRecord | BadRecord]:
    # Every id counts as seen, good record or not: a repeated id is an input error either way.
    first_index: dict[str, int] = {}
    for rec in raw:
        reason = _problem(rec, first_index)
        if rec.id:
            first_index.setdefault(rec.id, rec.index)
        if reason is None:
            yield SequenceRecord(rec.id, rec.sequence, rec.description, rec.index)
        elif on_error == "raise":
            raise SequenceInputError(display, f"id {rec.id!r}: {reason}", line=rec.line, record=rec.index + 1)
        else:
            yield BadRecord(rec.index, rec.id, reason)


# --------------------------------------------------------------------------- opening


def _open_stdin(fmt: str) -> Iterator[_Raw]:
    """Spool stdin to a temp file (pysam and pyarrow need a real file), open it, unlink it."""
    fd, tmp = tempfile.mkstemp(prefix="hexamer-stdin-")
    os.close(fd)
    try:
        spool_stdin(tmp)
        # The opened handles keep the data readable after the name is gone (POSIX).
        return _open_raw(tmp, "<stdin>", fmt)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _open_raw(path: str, display: str, fmt: str) -> Iterator[_Raw]:
    if not os.path.exists(path):
        raise SequenceInputError(display, "no such file")
    if os.path.isdir(path):
        raise SequenceInputError(display, "is a directory, not a sequence file")
    try:
        if fmt == "fasta":
            return _open_fastx(path, display)
        if fmt == "txt":
            return _iter_txt(_open_binary(path), display)
        if fmt in ("tsv", "csv"):
            return _open_delimited(path, display, "\t" if fmt == "tsv" else ",")
        return _open_parquet(path, display)
    except OSError as exc:
        raise SequenceInputError(display, f"cannot open: {exc.strerror or exc}") from exc


def _open_binary(path: str) -> IO[bytes]:
    """Open for reading bytes, gunzipping when the file starts with the gzip magic (bgzip too)."""
    with open(path, "rb") as f:
        gz = f.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _read_head(path: str, display: str) -> bytes:
    try:
        with _open_binary(path) as f:
            return f.read(_SNIFF_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise SequenceInputError(display, f"corrupt or truncated gzip data: {exc}") from exc


def _check_text(head: bytes, display: str, what: str) -> None:
    """Binary files are refused up front: pysam stops silently at a NUL byte."""
    nul = head.find(b"\x00")
    if nul >= 0:
        raise SequenceInputError(
            display, f"binary data (NUL byte), not {what}", line=head.count(b"\n", 0, nul) + 1
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the end of the sniffed block is not an error.
        if len(head) < _SNIFF_BYTES or exc.start < len(head) - 3:
            line = head.count(b"\n", 0, exc.start) + 1
            raise SequenceInputError(
                display, f"not UTF-8 text (binary data?), not {what}", line=line
            ) from None


def _open_fastx(path: str, display: str) -> Iterator[_Raw]:
    import pysam

    head = _read_head(path, display)
    _check_text(head, display, "FASTA/FASTQ")
    body = head.lstrip()
    if body and body[:1] not in (b">", b"@"):
        line = head[: len(head) - len(body)].count(b"\n") + 1
        found = body.split(b"\n", 1)[0][:40].decode("utf-8", "replace")
        raise SequenceInputError(
            display,
            f"expected a FASTA ('>') or FASTQ ('@') header, found {found!r}; "
            "for one sequence per line use a .txt name (or format='txt')",
            line=line,
        )
    # lines that start with '>' after a newline: one more than the first header's when it follows one
    headers = _check_no_nul(path, display) if len(head) == _SNIFF_BYTES else head.count(b"\n>")
    other_header = headers > (1 if b"\n" in head[: len(head) - len(body)] else 0)
    ident = body.split(b"\n", 1)[0][1:].rstrip(b"\r")
    if body[:1] == b">" and not ident[:1].strip() and not other_header:
        # the whole file is one record without an id: it would be skipped after a model load
        raise SequenceInputError(
            display,
            "the only FASTA header is a bare '>' (no id before any space): name the record ('>seq1')",
            line=head[: len(head) - len(body)].count(b"\n") + 1,
        )
    return _iter_fastx(pysam.FastxFile(path), display, fastq=body[:1] == b"@")


def _check_no_nul(path: str, display: str) -> int:
    """pysam ends a name or sequence at a NUL byte without a word (``AC\\0GT`` reads as ``AC``), so
    the whole file is searched for one first: one more pass, at C speed. Returns how many lines
    after the first start with '>' (the same pass tells a one-record FASTA)."""
    lines = 0
    headers = 0
    previous = b""
    try:
        with _open_binary(path) as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                nul = chunk.find(b"\x00")
                if nul >= 0:
                    line = lines + chunk.count(b"\n", 0, nul) + 1
                    raise SequenceInputError(display, "binary data (NUL byte), not FASTA/FASTQ", line=line)
                lines += chunk.count(b"\n")
                headers += (previous[-1:] + chunk).count(b"\n>")  # one across the boundary counts once
                previous = chunk
    except (OSError, EOFError, zlib.error) as exc:
        raise SequenceInputError(display, f"corrupt or truncated gzip data: {exc}", line=lines + 1) from exc
    return headers


def _iter_fastx(fx: object, display: str, *, fastq: bool = False) -> Iterator[_Raw]:
    """Records of a FASTA/FASTQ file. In a FASTQ file (``fastq``) a record without its ``+`` and
    quality lines (pysam reads it as a FASTA record: a file cut short, or a record mangled) is a
    bad record, reported like any other, never scored as if it were whole; so is a last record
    whose quality the end of the file cuts short (pysam can name neither it nor a later one)."""
    index = 0
    last_id: str | None = None
    with fx:  # type: ignore[attr-defined]
        records = iter(fx)  # type: ignore[call-overload]
        while True:
            try:
                rec = next(records)
                ident, seq, comment = rec.name or "", rec.sequence or "", rec.comment or ""
            except StopIteration:
                return
            except UnicodeDecodeError as exc:  # one record: pysam has read past it, the rest follow
                after = f"after {last_id!r}: " if last_id is not None else ""
                byte = exc.object[exc.start : exc.start + 1].hex()
                yield _Raw(index, "", "", problem=f"{after}not UTF-8 text (byte 0x{byte})")
                index += 1
                continue
            except (ValueError, OSError) as exc:  # pysam: truncated quality, bad gzip block
                after = f" (after {last_id!r})" if last_id is not None else ""
                if "truncated quality" in str(exc):  # the file ends inside the last record's quality
                    yield _Raw(index, "", "", problem=f"{_TRUNCATED_FASTQ_QUALITY}{after}")
                    return
                raise SequenceInputError(display, f"cannot parse{after}: {exc}", record=index + 1) from exc
            # pysam joins sequence lines but keeps spaces/tabs inside them; they are not bases.
            problem = _TRUNCATED_FASTQ if fastq and rec.quality is None else None
            yield _Raw(index, ident, "".join(seq.split()), comment, problem=problem)
            last_id = ident
            index += 1


def _iter_txt(f: IO[bytes], display: str) -> Iterator[_Raw]:
    index = 0
    lineno = 0
    with f:
        try:
            for lineno, line in enumerate(f, 1):
                if b"\x00" in line:
                    raise SequenceInputError(display, "binary data (NUL byte), not text", line=lineno)
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError:
                    raise SequenceInputError(display, "not UTF-8 text (binary data?)", line=lineno) from None
                seq = "".join(text.split())
                if not seq:
                    continue  # blank lines separate nothing and are not records
                if index == 0 and seq[0] in ">@":
                    raise SequenceInputError(
                        display,
                        "looks like FASTA/FASTQ, not one sequence per line; use a FASTA name (or format='fasta')",
                        line=lineno,
                    )
                yield _Raw(index, f"line{lineno}", seq, line=lineno)
                index += 1
        except (OSError, EOFError, zlib.error) as exc:
            raise SequenceInputError(
                display, f"corrupt or truncated gzip data: {exc}", line=lineno + 1
            ) from exc


def _missing_columns_error(display: str, found: list[str]) -> SequenceInputError:
    missing = [c for c in _REQUIRED_COLUMNS if c not in found]
    return SequenceInputError(
        display,
        f"missing column(s) {', '.join(map(repr, missing))}; expected columns 'id' and 'sequence' "
        f"(optional 'description'), found {', '.join(map(repr, found)) or 'none'}",
    )


def _open_delimited(path: str, display: str, delimiter: str) -> Iterator[_Raw]:
    _check_text(_read_head(path, display), display, "a TSV/CSV table")
    # Long genomic sequences exceed csv's default 128 KiB field limit (a process-wide setting).
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    text = io.TextIOWrapper(_open_binary(path), encoding="utf-8-sig", newline="")
    reader = csv.reader(text, delimiter=delimiter)
    try:
        header = next(reader, None)
    except (csv.Error, UnicodeDecodeError, OSError, EOFError, zlib.error) as exc:
        text.close()
        raise SequenceInputError(display, f"cannot parse the header: {exc}", line=1) from exc
    if header is None:
        text.close()
        raise _missing_columns_error(display, [])
    header = [h.strip() for h in header]
    if any(c not in header for c in _REQUIRED_COLUMNS):
        text.close()
        raise _missing_columns_error(display, header)
    return _iter_delimited(text, reader, header, display)


def _iter_delimited(
    text: IO[str], reader: Iterator[list[str]], header: list[str], display: str
) -> Iterator[_Raw]:
    id_col, seq_col = header.index("id"), header.index("sequence")
    desc_col = header.index("description") if "description" in header else None
    index = 0
    with text:
        try:
            for row in reader:
                line = reader.line_num  # type: ignore[attr-defined]
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                problem = None
                if len(row) != len(header):
                    problem = f"row has {len(row)} fields, the header has {len(header)}"
                ident = row[id_col].strip() if id_col < len(row) else ""
                seq = "".join(row[seq_col].split()) if seq_col < len(row) else ""
                desc = row[desc_col] if desc_col is not None and desc_col < len(row) else ""
                yield _Raw(index, ident, seq, desc, line, problem)
                index += 1
        except (csv.Error, UnicodeDecodeError, OSError, EOFError, zlib.error) as exc:
            line = reader.line_num + 1  # type: ignore[attr-defined]
            raise SequenceInputError(display, f"cannot parse: {exc}", line=line) from exc


def _open_parquet(path: str, display: str) -> Iterator[_Raw]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise SequenceInputError(display, f"not a readable Parquet file: {exc}") from exc
    schema = pf.schema_arrow
    if any(c not in schema.names for c in _REQUIRED_COLUMNS):
        pf.close()
        raise _missing_columns_error(display, list(schema.names))
    seq_type = schema.field("sequence").type
    is_string_view = getattr(pa.types, "is_string_view", lambda _: False)  # pyarrow >= 16
    if not (pa.types.is_string(seq_type) or pa.types.is_large_string(seq_type) or is_string_view(seq_type)):
        pf.close()
        raise SequenceInputError(display, f"column 'sequence' must hold text, found type {seq_type}")
    columns = ["id", "sequence"] + (["description"] if "description" in schema.names else [])
    return _iter_parquet(pf, columns, display)


def _iter_parquet(pf: object, columns: list[str], display: str) -> Iterator[_Raw]:
    import pyarrow as pa

    index = 0
    try:
        for batch in pf.iter_batches(columns=columns, batch_size=4096):  # type: ignore[attr-defined]
            ids = batch.column(0).to_pylist()
            seqs = batch.column(1).to_pylist()
            descs = batch.column(2).to_pylist() if len(columns) > 2 else [None] * len(ids)
            for ident, seq, desc in zip(ids, seqs, descs, strict=True):
                ident = "" if ident is None else str(ident).strip()
                seq = "" if seq is None else "".join(seq.split())
                yield _Raw(index, ident, seq, "" if desc is None else str(desc))
                index += 1
    except (pa.ArrowException, OSError) as exc:
        raise SequenceInputError(display, f"cannot read Parquet data: {exc}", record=index + 1) from exc
    finally:
        pf.close()  # type: ignore[attr-defined]
