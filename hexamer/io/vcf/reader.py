"""Read VCF/BCF files record by record: a bad record comes out with ``problem`` set, a bad file
raises :class:`VcfInputError` naming the path.

For plain and gzipped VCF text the raw lines are read alongside pysam, so a malformed record is
reported with its line number and whatever CHROM/POS/ID could be read from it.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from hexamer.io.fasta import fasta_compression
from hexamer.io.vcf.records import VcfRecord

__all__ = [
    "MAX_VCF_POS",
    "VcfInputError",
    "WriterView",
    "declared_contigs",
    "iter_data_lines",
    "open_variant_file",
    "read_vcf",
]

PathLike = str | os.PathLike[str]

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_CONSECUTIVE_ERRORS = 10_000  # a reader that fails this often in a row is not reading VCF
#: The largest POS htslib reads from a VCF line (it parses POS as a 62-bit number).
MAX_VCF_POS = 2**62 - 1
_VCF_COLUMNS = ("CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO", "FORMAT")


class VcfInputError(ValueError):
    """The variant file cannot be read at all (missing, not VCF/BCF, malformed header)."""


def _open_text(path: str) -> IO[bytes]:
    with open(path, "rb") as f:
        gz = f.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if gz else open(path, "rb")


def iter_data_lines(path: PathLike) -> Iterator[bytes]:
    """The raw lines after the ``#CHROM`` line of a text VCF (plain or gzip), newlines kept."""
    with _open_text(os.fspath(path)) as f:
        for raw in f:
            if raw.startswith(b"#CHROM"):
                break
        yield from f


def declared_contigs(path: PathLike) -> list[str]:
    """The contigs the header of ``path`` declares (``##contig`` lines), reading the header only
    (a text VCF's lines up to ``#CHROM``, a BCF's header block), never a record."""
    display = os.fspath(path)
    if not os.path.isfile(display):
        raise VcfInputError(f"{display}: no such file")
    if _is_bgzf(display):  # BCF or bgzip: htslib reads the header block alone
        with open_variant_file(display) as vf:
            return list(vf.header.contigs)
    found: list[str] = []
    with _open_text(display) as f:
        for raw in f:
            if not raw.startswith(b"##"):
                break
            m = _CONTIG_LINE.match(raw)
            if m is not None:
                found.append(m[1].decode("utf-8", "replace"))
    return found


_CONTIG_LINE = re.compile(rb"^##contig=<(?:[^>]*,)?ID=([^,>]+)")


@dataclass
class WriterView:
    """What a writer needs from a VCF, kept by the pass that scores it, so the writer need not
    read the input again: a text VCF's data lines, copied into ``body`` as they are read; the
    header htslib holds after the last record (with the declarations it invents for undeclared
    tags); a BCF's symbolic ALT alleles. ``complete`` once the pass reached the end and
    ``body`` holds every data line (a pass that could not copy them leaves it ``False``: the
    writer then reads the input itself). A BCF's records are copied as they are (binary, an
    uncompressed BCF under the input's header) to the file ``body`` names; a record htslib could
    not read leaves ``body`` None (the writer then reads the input, which fails there the same way)."""

    body: IO[bytes] | None = None
    header: Any = None
    is_bcf: bool = False
    symbolic: set[str] = field(default_factory=set)
    complete: bool = False
    #: the BCF writer copying a BCF's records to ``body``'s file during the pass
    copy: Any = None


class _RawLines:
    """The data lines of a text VCF, read next to pysam to name malformed records (and copied to
    ``sink`` when one is given).

    Every line after ``#CHROM`` is one pysam read attempt (htslib treats blank and ``#`` lines in
    the body as records too). If the two ever disagree (CHROM/POS of a parsed record differ from
    the line's), lines are no longer quoted and errors are reported without line details.
    """

    def __init__(self, path: str, sink: IO[bytes] | None = None) -> None:
        self._f: IO[bytes] | None = None
        self._sink = sink
        self.lineno = 0
        self.quoting = True
        #: every line after ``#CHROM`` went to the sink
        self.copied = False
        try:
            f = _open_text(path)
            for raw in f:
                self.lineno += 1
                if raw.startswith(b"#CHROM"):
                    self._f = f
                    self.copied = sink is not None
                    return
                if not raw.startswith(b"#"):
                    break
            f.close()
        except (OSError, EOFError):
            pass

    def _read(self) -> bytes:
        if self._f is None:
            return b""
        try:
            raw = self._f.readline()
        except (OSError, EOFError):
            self.copied = False
            self.close()
            return b""
        if not raw:
            self.close()
        elif self._sink is not None:
            self._sink.write(raw)
        return raw

    def next(self) -> tuple[int, str] | None:
        raw = self._read()
        if not raw:
            return None
        self.lineno += 1
        return (self.lineno, raw.decode("utf-8", "replace").rstrip("\r\n")) if self.quoting else None

    def drain(self) -> None:
        """The lines pysam did not ask for, to the sink."""
        while self._sink is not None and self._read():
            pass

    def close(self) -> None:
        if self._f is not None:
            with contextlib.suppress(OSError):
                self._f.close()
            self._f = None


def _field(text: str, i: int) -> str:
    parts = text.split("\t")
    return parts[i].strip() if len(parts) > i else ""


def open_variant_file(path: PathLike) -> Any:
    """``pysam.VariantFile`` for reading, with the errors this module promises.

    Plain-gzip VCF (not BGZF, which htslib cannot read as a stream here) is decompressed to a
    temporary file first; the file is unlinked as soon as htslib holds it open.
    """
    import pysam

    display = os.fspath(path)
    if not os.path.exists(display):
        raise VcfInputError(f"{display}: no such file")
    if os.path.isdir(display):
        raise VcfInputError(f"{display}: is a directory, not a VCF/BCF file")
    source = display
    spooled = None
    if _is_bgzf(display) is False:
        fd, spooled = tempfile.mkstemp(prefix="hexamer-vcf-", suffix=".vcf")
        try:
            with os.fdopen(fd, "wb") as out, gzip.open(display, "rb") as src:
                shutil.copyfileobj(src, out)
        except (OSError, EOFError) as exc:
            os.unlink(spooled)
            raise VcfInputError(f"{display}: corrupt or truncated gzip data ({exc})") from exc
        source = spooled
    old = pysam.set_verbosity(0)
    try:
        return pysam.VariantFile(source)
    except (ValueError, OSError, NotImplementedError) as exc:
        raise VcfInputError(
            f"{display}: not a readable VCF/BCF file or its header is malformed ({exc}); "
            "a VCF needs '##fileformat' and a tab-separated '#CHROM POS ID REF ALT ...' line"
        ) from exc
    finally:
        pysam.set_verbosity(old)
        if spooled is not None:
            with contextlib.suppress(OSError):
                os.unlink(spooled)


def read_vcf(
    path: PathLike, *, keep_records: bool = False, view: WriterView | None = None
) -> Iterator[VcfRecord]:
    """Stream the records of a VCF (plain, gzip, bgzip; indexed or not) or BCF file.

    The header is read now: a missing file or a header htslib cannot parse raises
    :class:`VcfInputError`. Records then stream in file order, malformed ones included (with
    ``problem`` set). ``keep_records`` attaches each pysam record (for the annotated-VCF writer).
    ``view`` keeps what a writer needs from the file (:class:`WriterView`) as the records pass.
    """
    display = os.fspath(path)
    vf = open_variant_file(display)
    if vf.format not in ("VCF", "BCF"):
        vf.close()
        raise VcfInputError(f"{display}: is {vf.format}, not VCF/BCF")
    sink = view.body if view is not None else None
    raw = _RawLines(display, sink) if vf.format == "VCF" else None
    if view is not None and view.body is not None and vf.format == "BCF":
        import pysam

        view.copy = pysam.VariantFile(view.body.name, "wb0", header=vf.header)
    return _records(vf, raw, display, keep_records, view)


def _records(
    vf: Any, raw: _RawLines | None, display: str, keep: bool, view: WriterView | None = None
) -> Iterator[VcfRecord]:
    import pysam

    index = 0
    failures = 0
    it = iter(vf)
    try:
        while True:
            old = pysam.set_verbosity(0)
            try:
                rec = next(it)
                error: Exception | None = None
            except StopIteration:
                if view is not None:
                    _keep(view, vf, raw)
                return
            except (OSError, ValueError) as exc:
                rec, error = None, exc
                if view is not None and view.copy is not None:  # the copy would lack it: not used
                    _drop_copy(view)
            finally:
                pysam.set_verbosity(old)
            if view is not None and view.copy is not None and rec is not None:
                view.copy.write(rec)
            line = raw.next() if raw is not None else None
            if error is not None:
                failures += 1
                if failures > _MAX_CONSECUTIVE_ERRORS:
                    raise VcfInputError(f"{display}: {failures} unreadable records in a row; stopping")
                if line is not None and not line[1].strip():
                    continue  # a blank line is not a record
                yield _malformed(index, line, error)
                index += 1
                continue
            failures = 0
            try:
                chrom, pos, ident = rec.chrom, rec.pos, rec.id or ""
                ref, alts = (rec.ref or "").upper(), tuple(a.upper() for a in (rec.alts or ()))
                if view is not None and raw is None:  # a BCF's symbolic alleles, for its header
                    view.symbolic.update(a for a in rec.alts or () if a.startswith("<"))
            except UnicodeDecodeError as exc:  # pysam decodes fields lazily, as UTF-8
                yield _undecodable(index, line, exc)
                index += 1
                continue
            if line is not None and not _same_record(line[1], chrom, pos):
                assert raw is not None
                raw.quoting = False  # lost step with pysam: stop quoting lines rather than misquote them
                line = None
            yield VcfRecord(
                index=index,
                chrom=chrom,
                pos=pos,
                id=ident,
                ref=ref,
                alts=alts,
                line=line[0] if line is not None else None,
                record=rec if keep else None,
                text=line[1] if keep and line is not None else None,
            )
            index += 1
    finally:
        vf.close()
        if raw is not None:
            raw.close()
        if view is not None and view.copy is not None:  # a pass that stopped early
            _drop_copy(view)


def _keep(view: WriterView, vf: Any, raw: _RawLines | None) -> None:
    """At the end of a pass: the header htslib completed, and the rest of the lines copied."""
    view.is_bcf = vf.format == "BCF"
    view.header = vf.header.copy()
    if view.copy is not None:
        view.copy.close()
        view.copy = None
    if raw is not None:
        raw.drain()
    view.complete = view.is_bcf or (raw is not None and raw.copied)


def _drop_copy(view: WriterView) -> None:
    """A BCF copy that will not hold every record: closed, and not offered to the writer."""
    with contextlib.suppress(OSError, ValueError):
        view.copy.close()
    view.copy = None
    view.body = None


def _same_record(text: str, chrom: str, pos: int) -> bool:
    field = _field(text, 1)
    return _field(text, 0) == chrom and (not field.isdigit() or int(field) == pos)


def _line_pos(text: str) -> int:
    """POS of a raw line as far as it can be told (0 when it is not a readable position)."""
    pos = _field(text, 1)
    return int(pos) if pos.isascii() and pos.isdigit() and int(pos) <= MAX_VCF_POS else 0


def _line_record(index: int, lineno: int, text: str, problem: str) -> VcfRecord:
    ident = _field(text, 2)
    return VcfRecord(
        index,
        _field(text, 0),
        _line_pos(text),
        "" if ident == "." else ident,
        _field(text, 3).upper(),
        (),
        line=lineno,
        problem=f"malformed VCF line {lineno}: {problem}",
    )


def _malformed(index: int, line: tuple[int, str] | None, error: Exception) -> VcfRecord:
    detail = str(error) or type(error).__name__
    if line is None:
        return VcfRecord(index, "", 0, "", "", (), problem=f"malformed record: htslib says {detail!r}")
    lineno, text = line
    pos = _field(text, 1)
    n_fields = len(text.split("\t"))
    if n_fields < 8:
        why = f"{n_fields} tab-separated field(s), VCF needs at least 8"
    elif not (pos.isascii() and pos.isdigit()):
        why = f"POS {pos!r} is not a number"
    elif int(pos) > MAX_VCF_POS:
        why = f"POS {pos} is larger than the largest position htslib reads ({MAX_VCF_POS})"
    else:
        why = f"htslib says {detail!r}"
    return _line_record(index, lineno, text, why)


def _undecodable(index: int, line: tuple[int, str] | None, error: UnicodeDecodeError) -> VcfRecord:
    """A record pysam parsed but cannot decode: a field holds bytes that are not UTF-8 text."""
    byte = f"0x{error.object[error.start]:02x}" if error.start < len(error.object) else "?"
    if line is None:
        return VcfRecord(
            index, "", 0, "", "", (), problem=f"malformed record: a field holds byte {byte}, not UTF-8 text"
        )
    lineno, text = line
    fields = text.split("\t")
    column = next((i for i, f in enumerate(fields) if "\ufffd" in f), None)
    name = (
        "a field"
        if column is None
        else _VCF_COLUMNS[column]
        if column < len(_VCF_COLUMNS)
        else f"sample column {column - 8}"
    )
    shown = f" ({fields[column].replace(chr(0xFFFD), '?')!r})" if column is not None else ""
    return _line_record(
        index, lineno, text.replace("\ufffd", "?"), f"{name}{shown} holds byte {byte}, not UTF-8 text"
    )


def _is_bgzf(path: str) -> bool | None:
    """True for BGZF, False for plain gzip, None for uncompressed."""
    return {"bgzf": True, "gzip": False}.get(fasta_compression(path))
