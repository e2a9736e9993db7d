"""The plumbing of a VCF header that htslib completes while it reads: the tags, ``END`` and
symbolic ALTs an input uses without declaring them.

htslib invents String "Dummy" declarations for undeclared tags and ends the process when it
translates a record that uses one, so a writer reads records from a copy whose header declares
everything (:func:`declared_source`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from hexamer.io.vcf.reader import iter_data_lines, open_variant_file

__all__ = [
    "CONTIG_NAME",
    "complete_header",
    "declare_end",
    "declare_symbolic",
    "declared_source",
    "quiet_htslib",
]

PathLike = str | os.PathLike[str]


_DUMMY_END = re.compile(r'^##INFO=<ID=END,Number=1,Type=String,Description="Dummy">$', re.MULTILINE)
_DECLARED_END = (
    '##INFO=<ID=END,Number=1,Type=Integer,Description="End position (used but not declared in the input)">'
)
_SYMBOLIC = re.compile(r"^<([^<>,\s\"]+)>$")
_ALT_DESCRIPTIONS = {
    "DEL": "Deletion",
    "INS": "Insertion",
    "DUP": "Duplication",
    "INV": "Inversion",
    "CNV": "Copy number variation",
    "DUP:TANDEM": "Tandem duplication",
    "DEL:ME": "Deletion of mobile element",
    "INS:ME": "Insertion of mobile element",
    "*": "Any other allele (gVCF)",
    "NON_REF": "Any other allele (gVCF)",
}
#: VCF 4.3 contig names (section 1.4.7), which a header line can declare.
CONTIG_NAME = re.compile(r"^[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*$")


@contextlib.contextmanager
def quiet_htslib() -> Iterator[None]:
    """htslib's own messages off (what they report is reported as statuses and reasons)."""
    import pysam

    old = pysam.set_verbosity(0)
    try:
        yield
    finally:
        pysam.set_verbosity(old)


def complete_header(vcf_in: PathLike) -> tuple[Any, bool, set[str]]:
    """``(header, is_bcf, symbolic)``: the input header plus every contig/INFO/FILTER/FORMAT tag
    htslib added while reading records that use undeclared ones (it declares them as String
    "Dummy"); for a BCF also the symbolic ALT alleles (``<DEL>``) its records use (a text VCF's
    are found while it is copied, see :func:`declared_source`)."""
    symbolic: set[str] = set()
    with open_variant_file(vcf_in) as source, quiet_htslib():
        is_bcf = source.format == "BCF"
        it = iter(source)
        while True:
            try:
                rec = next(it)
            except StopIteration:
                break
            except (OSError, ValueError):
                continue  # a malformed line: written as a failed record or rejected
            if is_bcf:
                symbolic.update(alt for alt in rec.alts or () if alt.startswith("<"))
        return source.header.copy(), is_bcf, symbolic


def declare_end(header: Any) -> None:
    """htslib refuses to format a record with a symbolic allele (``<DEL>``) while ``END`` is
    undeclared, so it is declared (an Integer, as the spec reserves it) when the input did not;
    records without symbolic alleles or an END do not get one."""
    if "END" not in header.info:
        header.info.add("END", 1, "Integer", "End position of the variant (declared by hexamer)")


def declare_symbolic(header: Any, symbolic: Iterable[str]) -> None:
    """An ``##ALT`` line for each symbolic allele the input uses without declaring it."""
    for alt in sorted(set(symbolic)):
        m = _SYMBOLIC.match(alt)
        if m is not None and m[1] not in header.alts:
            description = _ALT_DESCRIPTIONS.get(m[1], "Symbolic allele (used but not declared in the input)")
            header.add_line(f'##ALT=<ID={m[1]},Description="{description}">')


_SYMBOLIC_IN_LINE = re.compile(rb"<[^<>,\s\"]+>")


def _symbolic_alts(line: bytes) -> list[str]:
    """The symbolic alleles in the ALT column of a raw VCF line."""
    fields = line.split(b"\t", 5)
    if len(fields) < 5:
        return []
    return [m.decode("utf-8", "replace") for m in _SYMBOLIC_IN_LINE.findall(fields[4])]


_INVENTED = re.compile(r"^##(?:contig|INFO|FILTER|FORMAT)=<ID=([^,>]*)")


def _header_bytes(header: Any) -> bytes:
    """The header's text as bytes, less the lines htslib invented for the garbage of a malformed
    line (an ID that is not printable ASCII), which would not parse again. Input bytes that are
    not UTF-8 are kept as they were."""
    from pysam.libcutils import get_encoding_error_handler, set_encoding_error_handler

    old = get_encoding_error_handler()
    set_encoding_error_handler("surrogateescape")
    try:
        text = _DUMMY_END.sub(_DECLARED_END, str(header))
    finally:
        set_encoding_error_handler(old)
    kept = []
    for line in text.splitlines(keepends=True):
        m = _INVENTED.match(line)
        if m is not None and not re.fullmatch(r"[!-~]+", m[1]):
            continue
        kept.append(line)
    return "".join(kept).encode("utf-8", "surrogateescape")


def _lines(path: PathLike) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from f


@contextlib.contextmanager
def declared_source(
    header: Any, is_bcf: bool, vcf_in: PathLike, body: PathLike | None = None
) -> Iterator[tuple[str, Any]]:
    """``(path, header)``: where to read the records from for writing, and the output header.

    htslib marks a record parsed with an undeclared tag, and ``bcf_translate`` ends the whole
    process on such a record. So a text VCF is re-read from a temporary copy whose header is the
    output header (``header``: completed by :func:`complete_header`, so it declares every tag
    the records use, ``END`` as the Integer the spec makes it, plus the HEXAMER fields): its
    records need no translation, and one htslib still flags (a contig name a header line cannot
    declare) fails to write instead of ending the process. A BCF cannot have undeclared tags; it
    is read as it is and its records are translated to ``header``. ``body``: a copy of the text
    VCF's data lines made while it was read before (:class:`~hexamer.io.vcf.reader.WriterView`),
    read instead of the input.
    """
    if is_bcf:  # ``body``: a copy of its records made while it was read before
        yield os.fspath(body if body is not None else vcf_in), header
        return
    symbolic: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="hexamer-vcf-") as tmpdir:
        copy = os.path.join(tmpdir, "declared.vcf")
        with open(copy, "wb") as f:
            f.write(_header_bytes(header))
            for line in _lines(body) if body is not None else iter_data_lines(vcf_in):
                f.write(line)
                if b"<" in line:
                    symbolic.update(_symbolic_alts(line))
        with open_variant_file(copy) as declared:
            out_header = declared.header.copy()
        with quiet_htslib():
            declare_symbolic(out_header, symbolic)  # ##ALT lines: no record refers to them by number
        yield copy, out_header
