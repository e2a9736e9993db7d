"""A reference FASTA made ready for random access (``pysam.FastaFile``), whatever shape it came in.

htslib's ``faidx`` needs a ``.fai`` (and, for BGZF, a ``.gzi``), every line of a record but the last
of equal length, and BGZF rather than plain gzip; when it cannot index a file it only says "Could
not build fai index". :func:`prepare_fasta` accepts what FASTA users actually have and names the
real problem otherwise:

* an index next to the file is used as it is (nothing else is read);
* otherwise the file is indexed into a private temporary folder, never next to the user's file;
* plain gzip (UCSC ships ``hg38.fa.gz`` so) is decompressed into that folder and indexed there;
  a FASTA whose lines within a record differ in length (valid FASTA, which faidx refuses) is
  checked line by line and rewritten there with 60 bases per line. Cost: the uncompressed size in
  temporary disk space (``$TMPDIR``; about 3.1 GB for hg38) for as long as the process keeps the
  file open, and time: about 3 s per 100 Mb for plain gzip (as for indexing an unindexed bgzip
  file), about 7 s per 100 Mb for a ragged file (2-core machine);
* a duplicate contig name (which htslib would skip with a warning), a file without a ``>``
  header, a binary file and an empty last record raise :class:`FastaError` naming the line.

The last prepared file is remembered, so opening the same reference twice in one process (the CLI
reads its contig names before the job starts) does the work once.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

__all__ = ["FastaError", "PreparedFasta", "fasta_compression", "prepare_fasta"]

PathLike = str | os.PathLike[str]

_GZIP_MAGIC = b"\x1f\x8b"
_LINE_WIDTH = 60
_CHUNK = 1 << 22


class FastaError(ValueError):
    """The reference FASTA cannot be opened or indexed; the message names the file and the problem."""


@dataclass(frozen=True)
class PreparedFasta:
    """What to hand to ``pysam.FastaFile``: the data file, its index files, and a note saying
    what was done to make it indexable (None when nothing was)."""

    source: str
    path: str
    fai: str
    gzi: str | None
    note: str | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False, compare=False)


def fasta_compression(path: PathLike) -> str:
    """``bgzf``, ``gzip`` (plain, not BGZF) or ``none``, from the first bytes of the file."""
    with open(os.fspath(path), "rb") as f:
        head = f.read(18)
    if head[:2] != _GZIP_MAGIC:
        return "none"
    # BGZF: FEXTRA set and an extra subfield 'BC'.
    return "bgzf" if len(head) >= 14 and bool(head[3] & 4) and head[12:14] == b"BC" else "gzip"


_last: tuple[tuple[str, int, int], PreparedFasta] | None = None


def prepare_fasta(path: PathLike) -> PreparedFasta:
    """Make ``path`` ready for ``pysam.FastaFile`` (see the module docstring) or raise
    :class:`FastaError`."""
    global _last
    display = os.fspath(path)
    if not os.path.exists(display):
        raise FastaError(f"{display}: no such FASTA file")
    if not os.path.isfile(display):
        raise FastaError(f"{display}: not a regular file")
    st = os.stat(display)
    key = (os.path.abspath(display), st.st_size, st.st_mtime_ns)
    if _last is not None and _last[0] == key:
        return _last[1]
    prepared = _prepare(display)
    if prepared._tmp is not None:
        _last = (key, prepared)  # the one before is cleaned up when nothing holds it any more
    return prepared


def _prepare(display: str) -> PreparedFasta:
    compression = fasta_compression(display)
    fai, gzi = display + ".fai", display + ".gzi"
    if os.path.isfile(fai) and (compression == "none" or (compression == "bgzf" and os.path.isfile(gzi))):
        return PreparedFasta(display, display, fai, gzi if compression == "bgzf" else None)
    tmp = tempfile.TemporaryDirectory(prefix="hexamer-fasta-")
    try:
        source, why = display, None
        if compression == "gzip":
            source, why = os.path.join(tmp.name, "decompressed.fa"), "plain gzip (not BGZF)"
            _gunzip(display, source)
        fai = os.path.join(tmp.name, os.path.basename(source) + ".fai")
        gzi = os.path.join(tmp.name, os.path.basename(source) + ".gzi") if compression == "bgzf" else None
        if not _faidx(source, fai, gzi):
            return _rewritten(source, display, tmp, why)
        _check_unique_names(source, display, fai)
        note = None if source == display else _copy_note(display, why, tmp, source)
        return PreparedFasta(display, source, fai, gzi, note, tmp)
    except BaseException:
        tmp.cleanup()
        raise


def _gunzip(display: str, target: str) -> None:
    try:
        with gzip.open(display, "rb") as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, _CHUNK)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise FastaError(f"{display}: corrupt or truncated gzip data ({exc})") from exc


def _faidx(path: str, fai: str, gzi: str | None) -> bool:
    """Index with htslib; False when it cannot (the caller then finds out why)."""
    import pysam

    old = pysam.set_verbosity(0)
    try:
        with _quiet_stderr():
            pysam.faidx(path, "--fai-idx", fai, *(["--gzi-idx", gzi] if gzi else []))
        return True
    except pysam.SamtoolsError:
        return False
    finally:
        pysam.set_verbosity(old)


def _copy_note(display: str, why: str | None, tmp: tempfile.TemporaryDirectory[str], copy: str) -> str:
    return (
        f"{display}: {why or 'not indexable as it is'}: read through an uncompressed copy in {tmp.name} "
        f"({os.path.getsize(copy):,} bytes)"
    )


def _rewritten(
    source: str, display: str, tmp: tempfile.TemporaryDirectory[str], why: str | None
) -> PreparedFasta:
    """Check ``source`` line by line while writing it uncompressed with even lines, and index that."""
    copy = os.path.join(tmp.name, "reference.fa")
    with _open_bytes(source) as src, open(copy, "wb") as out:
        ragged = _scan(src, display, out)
    if source != display:
        os.unlink(source)  # the decompressed copy: the even one replaces it
    fai = copy + ".fai"
    if not _faidx(copy, fai, None):  # the scan should have named anything htslib refuses
        raise FastaError(f"{display}: not a readable FASTA file (htslib cannot index it)")
    reasons = [r for r in (why, "lines of unequal length within a record" if ragged else None) if r]
    return PreparedFasta(display, copy, fai, None, _copy_note(display, " and ".join(reasons), tmp, copy), tmp)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """htslib prints its own ``[E::fai_build_core]`` lines on fd 2; the error raised says it better."""
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(fd, 2)
    finally:
        os.close(fd)


def _open_bytes(path: str) -> IO[bytes]:
    with open(path, "rb") as f:
        gz = f.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _scan(src: IO[bytes], display: str, out: IO[bytes] | None) -> bool:
    """Check every line; with ``out``, write the records with ``_LINE_WIDTH`` bases per line.
    Returns whether some record had lines of unequal length."""
    first_line: dict[str, int] = {}
    name: str | None = None
    name_line = 0
    n_bases = 0
    widths: set[int] = set()
    last_width = 0
    ragged = False
    pending = bytearray()
    lineno = 0

    def flush(final: bool) -> None:
        nonlocal pending
        if out is None:
            pending.clear()
            return
        cut = len(pending) - len(pending) % _LINE_WIDTH if not final else len(pending)
        view = memoryview(pending)
        for i in range(0, cut, _LINE_WIDTH):
            out.write(view[i : i + _LINE_WIDTH])
            out.write(b"\n")
        del view
        pending = pending[cut:]

    try:
        for raw in src:
            lineno += 1
            line = raw.rstrip(b"\r\n")
            if b"\x00" in line:
                raise FastaError(f"{display}: line {lineno}: binary data (NUL byte), not FASTA")
            if line.startswith(b">"):
                if name is not None:
                    flush(True)
                try:
                    header = line[1:].decode("utf-8")
                except UnicodeDecodeError:
                    raise FastaError(
                        f"{display}: line {lineno}: binary data (not UTF-8 text), not FASTA"
                    ) from None
                ident = header.split(maxsplit=1)[0] if header.strip() else ""
                if not ident:
                    raise FastaError(f"{display}: line {lineno}: a '>' header without a name")
                if ident in first_line:
                    raise FastaError(
                        f"{display}: line {lineno}: duplicate contig name {ident!r} (first on line "
                        f"{first_line[ident]}); contig names must be unique"
                    )
                first_line[ident] = lineno
                name, name_line, n_bases, widths, last_width = ident, lineno, 0, set(), 0
                if out is not None:
                    out.write(line + b"\n")
                continue
            stripped = line.strip()
            if name is None:
                if not stripped:
                    continue
                if not stripped.isascii():
                    raise FastaError(f"{display}: line {lineno}: binary data, not FASTA")
                shown = stripped[:40].decode("ascii", "replace")
                raise FastaError(
                    f"{display}: line {lineno}: expected a '>name' header line, found {shown!r}; "
                    "a FASTA file starts with a header"
                )
            if not stripped.isascii():
                raise FastaError(
                    f"{display}: line {lineno} (in {name!r}): binary data or a non-ASCII character, not bases"
                )
            if not stripped:
                continue
            if last_width and len(stripped) != last_width:
                widths.add(last_width)
            last_width = len(stripped)
            if len(widths) > 1 or (widths and last_width > max(widths)):
                ragged = True
            n_bases += len(stripped)
            pending += stripped
            if len(pending) >= _CHUNK:
                flush(False)
    except (OSError, EOFError, zlib.error) as exc:
        raise FastaError(f"{display}: corrupt or truncated gzip data after line {lineno} ({exc})") from exc
    if name is None:
        raise FastaError(f"{display}: no '>' header line: empty, or not FASTA")
    if n_bases == 0:
        raise FastaError(
            f"{display}: line {name_line}: the last record {name!r} has no sequence (htslib cannot index "
            "a FASTA that ends with an empty record); remove its header line"
        )
    flush(True)
    return ragged


def _check_unique_names(source: str, display: str, fai: str) -> None:
    """htslib keeps the first of two records with one name and drops the other with a warning:
    count the headers, and name the duplicate when the index has fewer."""
    with open(fai, "rb") as f:
        indexed = sum(1 for _ in f)
    headers = 0
    previous = b"\n"
    with _open_bytes(source) as src:
        try:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                headers += chunk.count(b"\n>") + (previous[-1:] == b"\n" and chunk[:1] == b">")
                previous = chunk
        except (OSError, EOFError, zlib.error) as exc:
            raise FastaError(f"{display}: corrupt or truncated gzip data ({exc})") from exc
    if headers == indexed:
        return
    with _open_bytes(source) as src:
        _scan(src, display, None)  # raises, naming the duplicate
    raise FastaError(f"{display}: {headers} header lines but {indexed} indexed contigs")
