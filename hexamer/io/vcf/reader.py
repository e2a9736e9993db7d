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
from typing import IO, Any

from hexamer.io.fasta import fasta_compression
from hexamer.io.vcf.records import VcfRecord

__all__ = [
    "MAX_VCF_POS",
    "VcfInputError",
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


class _RawLines:
    """The data lines of a text VCF, read next to pysam to name malformed records.

    Every line after ``#CHROM`` is one pysam read attempt (htslib treats blank and ``#`` lines in
    the body as records too). If the two ever disagree (CHROM/POS of a parsed record differ from
    the line's), the raw view is dropped and errors are reported without line details.
    """

    def __init__(self, path: str) -> None:
        self._f: IO[bytes] | None = None
        self.lineno = 0
        try:
            f = _open_text(path)
            for raw in f:
                self.lineno += 1
                if raw.startswith(b"#CHROM"):
                    self._f = f
                    return
                if not raw.startswith(b"#"):
                    break
            f.close()
        except (OSError, EOFError):
            pass

    def next(self) -> tuple[int, str] | None:
        if self._f is None:
            return None
        try:
            raw = self._f.readline()
        except (OSError, EOFError):
            self.close()
            return None
        if not raw:
            self.close()
            return None
        self.lineno += 1
        return self.lineno, raw.decode("utf-8", "replace").rstrip("\r\n")

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


def read_vcf(path: PathLike, *, keep_records: bool = False) -> Iterator[VcfRecord]:
    """Stream the records of a VCF (plain, gzip, bgzip; indexed or not) or BCF file.

    The header is read now: a missing file or a header htslib cannot parse raises
    :class:`VcfInputError`. Records then stream in file order, malformed ones included (with
    ``problem`` set). ``keep_records`` attaches each pysam record (for the annotated-VCF writer).
    """
    display = os.fspath(path)
    vf = open_variant_file(display)
    if vf.format not in ("VCF", "BCF"):
        vf.close()
        raise VcfInputError(f"{display}: is {vf.format}, not VCF/BCF")
    raw = _RawLines(display) if vf.format == "VCF" else None
    return _records(vf, raw, display, keep_records)


def _records(vf: Any, raw: _RawLines | None, display: str, keep: bool) -> Iterator[VcfRecord]:
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
                return
            except (OSError, ValueError) as exc:
                rec, error = None, exc
            finally:
                pysam.set_verbosity(old)
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
            except UnicodeDecodeError as exc:  # pysam decodes fields lazily, as UTF-8
                yield _undecodable(index, line, exc)
                index += 1
                continue
            if line is not None and not _same_record(line[1], chrom, pos):
                assert raw is not None
                raw.close()  # lost step with pysam: stop quoting lines rather than misquote them
                raw, line = None, None
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
