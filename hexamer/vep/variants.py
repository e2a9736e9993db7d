"""Variants from VCF/BCF files and their reference bases from FASTA.

A variant-effect job over a large VCF must not die on one odd record, so the problems are split
the same way as in :mod:`hexamer.io`:

* a bad *file* (missing, not VCF/BCF, a header htslib cannot parse, a FASTA that cannot be
  indexed) raises :class:`VcfInputError` / :class:`FastaError` naming the path;
* a bad *record* (a line htslib cannot parse, a position below 1, a REF/ALT with characters that
  are not nucleotides) comes out as a :class:`VcfRecord` with ``problem`` set, in input order, and
  reading goes on.

Every record yields one :class:`Variant` per ALT allele (``alt_index`` 0, 1, ...), so a
multi-allelic record becomes several variants that keep their record index. For plain and gzipped
VCF text the raw lines are read alongside pysam, so a malformed record is reported with its line
number and whatever CHROM/POS/ID could be read from it.
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

__all__ = [
    "KINDS",
    "FastaError",
    "Reference",
    "Variant",
    "VcfInputError",
    "VcfRecord",
    "classify",
    "iter_data_lines",
    "open_variant_file",
    "read_vcf",
]

PathLike = str | os.PathLike[str]

#: Variant kinds; ``none`` is a record without an ALT allele (ALT ``.``).
KINDS = ("SNV", "MNV", "insertion", "deletion", "complex", "symbolic", "none")

_NUCLEOTIDES = re.compile(r"^[ACGTN]+$")
_GZIP_MAGIC = b"\x1f\x8b"
_MAX_CONSECUTIVE_ERRORS = 10_000  # a reader that fails this often in a row is not reading VCF


class VcfInputError(ValueError):
    """The variant file cannot be read at all (missing, not VCF/BCF, malformed header)."""


class FastaError(ValueError):
    """The reference FASTA cannot be opened or indexed."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One ALT allele of one input record.

    ``record`` is the 0-based index of the record among all data lines of the input (malformed ones
    included), ``alt_index`` the 0-based index of the allele in ALT; together they are the key of
    an output row. ``ref``/``alt`` are upper-cased; ``pos`` is the 1-based VCF position.
    """

    record: int
    alt_index: int
    chrom: str
    pos: int
    ref: str
    alt: str
    id: str
    kind: str
    error: str | None = None  # malformed input: the row's status is "failed"
    skip: str | None = None  # not a scorable sequence change: the row's status is "skipped"

    @property
    def key(self) -> tuple[int, int]:
        return (self.record, self.alt_index)

    @property
    def start(self) -> int:
        """0-based position of the first REF base."""
        return self.pos - 1


@dataclass(slots=True)
class VcfRecord:
    """One data line of the input; ``problem`` is set when it could not be parsed.

    ``line`` is the 1-based line number in the file (text VCF only). ``record`` is the pysam
    record when the reader was asked to keep it (for writing the annotated VCF).
    """

    index: int
    chrom: str
    pos: int
    id: str
    ref: str
    alts: tuple[str, ...]
    line: int | None = None
    problem: str | None = None
    record: Any = field(default=None, repr=False)

    def variants(self) -> list[Variant]:
        """One :class:`Variant` per ALT allele (one row with ALT ``.`` when there is none)."""
        if self.problem is not None:
            return [
                Variant(self.index, 0, self.chrom, self.pos, self.ref, "", self.id, "", error=self.problem)
            ]
        ref_error = _allele_problem(self.ref, "REF")
        if self.pos < 1:
            ref_error = f"POS {self.pos} is not a 1-based position"
        out = []
        for j, alt in enumerate(self.alts or (".",)):
            kind, skip = classify(self.ref, alt)
            error = ref_error
            if error is None and skip is None:
                error = _allele_problem(alt, "ALT")
            if error is not None:
                skip = None
            out.append(
                Variant(self.index, j, self.chrom, self.pos, self.ref, alt, self.id, kind, error, skip)
            )
        return out


def _allele_problem(allele: str, what: str) -> str | None:
    if not allele or allele == ".":
        return f"{what} allele is missing"
    if not _NUCLEOTIDES.match(allele):
        bad = next(c for c in allele if c not in "ACGTN")
        return f"{what} allele {allele!r} holds {bad!r}, not a nucleotide (A, C, G, T, N)"
    return None


def classify(ref: str, alt: str) -> tuple[str, str | None]:
    """``(kind, reason)``: the variant kind, and why it is not a sequence change to score (or None).

    Equal lengths: SNV (1 base) or MNV. Otherwise the shared leading and then trailing bases are
    trimmed (the VCF anchor base): nothing left of REF is an insertion, of ALT a deletion, else
    complex. Symbolic alleles (``<DEL>``), breakends, ``*`` and a missing ALT are not sequences.
    """
    ref, alt = ref.upper(), alt.upper()
    if alt in (".", ""):
        return "none", "no ALT allele (ALT is '.')"
    if alt == "*":
        return "symbolic", "'*' allele (overlapping deletion) has no sequence to score"
    if alt.startswith("<"):
        return "symbolic", f"symbolic allele {alt} has no sequence to score"
    if "[" in alt or "]" in alt or alt.startswith(".") or alt.endswith("."):
        return "symbolic", f"breakend {alt} has no sequence to score"
    if len(ref) == len(alt):
        kind = "SNV" if len(ref) == 1 else "MNV"
    else:
        head = 0
        while head < min(len(ref), len(alt)) and ref[head] == alt[head]:
            head += 1
        r, a = ref[head:], alt[head:]
        tail = 0
        while tail < min(len(r), len(a)) and r[-1 - tail] == a[-1 - tail]:
            tail += 1
        r, a = r[: len(r) - tail], a[: len(a) - tail]
        kind = "insertion" if not r else "deletion" if not a else "complex"
    return kind, None


# --------------------------------------------------------------------------- VCF reading


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
            if rec is not None:
                try:  # pysam decodes text fields as UTF-8 on access
                    chrom, ident, ref, alts = rec.chrom, rec.id, rec.ref, rec.alts
                except UnicodeDecodeError as exc:
                    rec, error = None, ValueError(f"a field holds bytes that are not UTF-8 ({exc.reason})")
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
            if line is not None and not _same_record(line[1], rec):
                assert raw is not None
                raw.close()  # lost step with pysam: stop quoting lines rather than misquote them
                raw, line = None, None
            yield VcfRecord(
                index=index,
                chrom=chrom,
                pos=rec.pos,
                id=ident or "",
                ref=(ref or "").upper(),
                alts=tuple(a.upper() for a in (alts or ())),
                line=line[0] if line is not None else None,
                record=rec if keep else None,
            )
            index += 1
    finally:
        vf.close()
        if raw is not None:
            raw.close()


def _same_record(text: str, rec: Any) -> bool:
    pos = _field(text, 1)
    return _field(text, 0) == rec.chrom and (not pos.isdigit() or int(pos) == rec.pos)


def _malformed(index: int, line: tuple[int, str] | None, error: Exception) -> VcfRecord:
    detail = str(error) or type(error).__name__
    if line is None:
        return VcfRecord(index, "", 0, "", "", (), problem=f"malformed record: htslib says {detail!r}")
    lineno, text = line
    pos = _field(text, 1)
    n_fields = len(text.split("\t"))
    if n_fields < 8:
        why = f"{n_fields} tab-separated field(s), VCF needs at least 8"
    elif not pos.isdigit():
        why = f"POS {pos!r} is not a number"
    else:
        why = f"htslib says {detail!r}"
    return VcfRecord(
        index,
        _field(text, 0),
        int(pos) if pos.isdigit() else 0,
        "" if _field(text, 2) == "." else _field(text, 2),
        _field(text, 3).upper(),
        (),
        line=lineno,
        problem=f"malformed VCF line {lineno}: {why}",
    )


# --------------------------------------------------------------------------- reference FASTA


def _is_bgzf(path: str) -> bool | None:
    """True for BGZF, False for plain gzip, None for uncompressed."""
    with open(path, "rb") as f:
        head = f.read(18)
    if head[:2] != _GZIP_MAGIC:
        return None
    # BGZF: FEXTRA set and an extra subfield 'BC'.
    return len(head) >= 14 and bool(head[3] & 4) and head[12:14] == b"BC"


def _contig_aliases(name: str) -> list[str]:
    base = name[3:] if name.lower().startswith("chr") else name
    names = [base, f"chr{base}", f"Chr{base}", f"CHR{base}"]
    if base.upper() in ("M", "MT"):
        names += ["M", "MT", "chrM", "chrMT"]
    return [n for n in dict.fromkeys(names) if n != name]


class Reference:
    """A reference FASTA (plain or bgzipped) opened with ``pysam.FastaFile``.

    A FASTA without its ``.fai`` (or, bgzipped, its ``.gzi``) is indexed into a private temporary
    directory, never next to the user's file. Sequences come back upper-cased (soft-masking is
    not sequence). Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: PathLike) -> None:
        import pysam

        self.path = os.fspath(path)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if not os.path.isfile(self.path):
            raise FastaError(f"{self.path}: no such FASTA file")
        bgzf = _is_bgzf(self.path)
        if bgzf is False:
            raise FastaError(
                f"{self.path}: gzip-compressed but not BGZF, so it cannot be indexed; "
                "recompress it with `bgzip` (or decompress it)"
            )
        fai, gzi = self.path + ".fai", self.path + ".gzi"
        old = pysam.set_verbosity(0)
        try:
            if os.path.isfile(fai) and (not bgzf or os.path.isfile(gzi)):
                self._fasta = pysam.FastaFile(self.path)
            else:
                self._tmp = tempfile.TemporaryDirectory(prefix="hexamer-fai-")
                name = os.path.basename(self.path)
                fai = os.path.join(self._tmp.name, name + ".fai")
                gzi = os.path.join(self._tmp.name, name + ".gzi")
                args = ["--fai-idx", fai] + (["--gzi-idx", gzi] if bgzf else [])
                pysam.faidx(self.path, *args)
                self._fasta = pysam.FastaFile(
                    self.path, filepath_index=fai, filepath_index_compressed=gzi if bgzf else None
                )
        except (OSError, ValueError, pysam.SamtoolsError) as exc:
            self.close()
            raise FastaError(f"{self.path}: not a readable FASTA file ({exc})") from exc
        finally:
            pysam.set_verbosity(old)
        self.lengths: dict[str, int] = dict(zip(self._fasta.references, self._fasta.lengths, strict=True))
        self.order: dict[str, int] = {name: i for i, name in enumerate(self._fasta.references)}
        self._resolved: dict[str, tuple[str | None, str | None]] = {}

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fasta = getattr(self, "_fasta", None)
        if fasta is not None:
            fasta.close()
            self._fasta = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def resolve(self, name: str) -> tuple[str | None, str | None]:
        """``(FASTA contig, message)`` for a VCF contig name.

        An exact match gives ``(name, None)``. Otherwise ``chr``-prefix and mitochondrial
        (``chrM``/``MT``) spellings are tried: exactly one hit gives ``(hit, note)`` where the note
        says which name was used; none or several give ``(None, reason)``.
        """
        cached = self._resolved.get(name)
        if cached is not None:
            return cached
        if name in self.lengths:
            out: tuple[str | None, str | None] = (name, None)
        else:
            hits = [a for a in _contig_aliases(name) if a in self.lengths]
            if len(hits) == 1:
                out = (hits[0], f"VCF contig {name!r} is not in the FASTA; using its contig {hits[0]!r}")
            elif hits:
                out = (None, f"contig {name!r} is not in the FASTA and could be any of {hits}")
            else:
                shown = ", ".join(list(self.lengths)[:5]) + (", ..." if len(self.lengths) > 5 else "")
                out = (None, f"contig {name!r} is not in the FASTA (its contigs: {shown})")
        self._resolved[name] = out
        return out

    def fetch(self, contig: str, start: int, end: int) -> str:
        """Upper-cased bases ``[start, end)`` of a FASTA contig, clipped to the contig."""
        length = self.lengths[contig]
        start, end = max(0, start), min(length, end)
        if end <= start:
            return ""
        return self._fasta.fetch(contig, start, end).upper()
