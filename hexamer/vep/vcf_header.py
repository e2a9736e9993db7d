"""The header of an annotated VCF: the ``HEXAMER_*`` INFO fields, provenance lines, and the
tags, ``END`` and symbolic ALTs an input uses without declaring them.

htslib invents String "Dummy" declarations for undeclared tags and ends the process when it
translates a record that uses one, so the writer (:mod:`hexamer.vep.vcf_output`) reads records
from a copy whose header declares everything (:func:`declared_source`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from hexamer.vep.variants import iter_data_lines, open_variant_file

__all__ = [
    "CALIBRATED_INFO",
    "CONTIG_NAME",
    "HEXAMER_INFO",
    "INFO_OOV_BP",
    "INFO_PHRED",
    "INFO_RAW",
    "INFO_REASON",
    "INFO_RECIPE",
    "INFO_SCORE",
    "INFO_SCORED_BP",
    "INFO_STATUS",
    "add_hexamer_info",
    "add_provenance",
    "complete_header",
    "declare_end",
    "declare_symbolic",
    "declared_source",
    "extra_info",
    "extra_info_id",
    "quiet_htslib",
    "vcf_escape",
]

PathLike = str | os.PathLike[str]

INFO_SCORE = "HEXAMER_SCORE"
INFO_STATUS = "HEXAMER_STATUS"
INFO_RECIPE = "HEXAMER_RECIPE"
INFO_REASON = "HEXAMER_REASON"
INFO_SCORED_BP = "HEXAMER_SCORED_BP"
INFO_OOV_BP = "HEXAMER_OOV_BP"
#: with a calibration (``hexamer vep --calibration``): the raw score and its PHRED, CADD/SpliceAI style
INFO_RAW = "HEXAMER_RAW"
INFO_PHRED = "HEXAMER_PHRED"
CALIBRATED_INFO = (
    (INFO_RAW, "A", "Float", "hexamer raw score of each ALT allele (the same as HEXAMER_SCORE)"),
    (
        INFO_PHRED,
        "A",
        "Float",
        "hexamer PHRED-like score of each ALT allele: -10*log10(share of background SNVs at least as "
        "deleterious); higher = the alt is less likely under the model (docs/ism.md)",
    ),
)
HEXAMER_INFO = (
    (
        INFO_SCORE,
        "A",
        "Float",
        "hexamer variant-effect score of each ALT allele (see HEXAMER_RECIPE for its sign)",
    ),
    (
        INFO_STATUS,
        "A",
        "String",
        "hexamer scoring status of each ALT allele: ok, skipped, ref_mismatch or failed",
    ),
    (
        INFO_SCORED_BP,
        "A",
        "Integer",
        "hexamer: bases scored in each window of each ALT (window recipe) or read in its context (next_base)",
    ),
    (
        INFO_OOV_BP,
        "A",
        "Integer",
        "hexamer: bases of those windows or contexts inside <oov> 6-mers (a non-ACGT base), not scored",
    ),
    (
        INFO_RECIPE,
        "1",
        "String",
        "hexamer recipe: window = LL(alt) - LL(ref); next_base = log P(ref) - log P(alt)",
    ),
    (
        INFO_REASON,
        "A",
        "String",
        "why hexamer did not score an ALT allele (percent-encoded: %20 space, %2C comma, %3B semicolon, "
        "%3D equals sign, %25 percent sign)",
    ),
)

_PERCENT = str.maketrans(
    {**{chr(c): f"%{c:02X}" for c in (*range(32), 127)}, **{c: f"%{ord(c):02X}" for c in "%,;= "}}
)


def vcf_escape(text: str) -> str:
    """``text`` as an INFO value: ``%``, ``,``, ``;``, ``=``, spaces and control characters
    percent-encoded (VCF 4.3 section 1.2; spaces too, which VCF 4.2 readers refuse in INFO).
    ``urllib.parse.unquote`` gives the text back."""
    return text.translate(_PERCENT)


def extra_info_id(column: str) -> str:
    """The INFO field of an extra row column (a fine-tuned head's output): ``HEXAMER_<column>``,
    any character an INFO ID may not hold replaced by ``_``."""
    return "HEXAMER_" + re.sub(r"[^0-9A-Za-z_.]", "_", column)


def extra_info(columns: Mapping[str, str]) -> tuple[tuple[str, str, str, str], ...]:
    """INFO declarations (Number=A, Float) of extra columns given as ``column -> description``."""
    out = tuple((extra_info_id(c), "A", "Float", d) for c, d in columns.items())
    ids = [ident for ident, *_ in out]
    taken = {ident for ident, *_ in (*HEXAMER_INFO, *CALIBRATED_INFO)}
    if len(set(ids)) != len(ids) or taken & set(ids):
        raise ValueError(f"columns {', '.join(columns)} give INFO fields that repeat: {', '.join(ids)}")
    return out


def add_hexamer_info(header: Any, calibrated: bool = False, extra: Mapping[str, str] | None = None) -> None:
    """Declare the ``HEXAMER_*`` INFO fields (and the calibrated ones when ``calibrated``, and one
    per ``extra`` column, ``column -> description``)."""
    declared = (*HEXAMER_INFO, *(CALIBRATED_INFO if calibrated else ()), *extra_info(extra or {}))
    for ident, number, kind, description in declared:
        if ident in header.info:
            have = header.info[ident]
            if str(have.number) != number or have.type != kind:
                raise ValueError(
                    f"the input header already defines INFO {ident} as Number={have.number},Type={have.type}; "
                    f"hexamer writes Number={number},Type={kind}"
                )
            continue
        header.info.add(ident, number, kind, description)


def add_provenance(header: Any, provenance: Mapping[str, str] | None) -> None:
    """``##hexamer_KEY=VALUE`` lines (one line each: newlines become spaces)."""
    for key, value in (provenance or {}).items():
        header.add_line(f"##hexamer_{key}=" + " ".join(str(value).splitlines()))


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


@contextlib.contextmanager
def declared_source(header: Any, is_bcf: bool, vcf_in: PathLike) -> Iterator[tuple[str, Any]]:
    """``(path, header)``: where to read the records from for writing, and the output header.

    htslib marks a record parsed with an undeclared tag, and ``bcf_translate`` ends the whole
    process on such a record. So a text VCF is re-read from a temporary copy whose header is the
    output header (``header``: completed by :func:`complete_header`, so it declares every tag
    the records use, ``END`` as the Integer the spec makes it, plus the HEXAMER fields): its
    records need no translation, and one htslib still flags (a contig name a header line cannot
    declare) fails to write instead of ending the process. A BCF cannot have undeclared tags; it
    is read as it is and its records are translated to ``header``.
    """
    if is_bcf:
        yield os.fspath(vcf_in), header
        return
    symbolic: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="hexamer-vcf-") as tmpdir:
        copy = os.path.join(tmpdir, "declared.vcf")
        with open(copy, "wb") as f:
            f.write(_header_bytes(header))
            for line in iter_data_lines(vcf_in):
                f.write(line)
                if b"<" in line:
                    symbolic.update(_symbolic_alts(line))
        with open_variant_file(copy) as declared:
            out_header = declared.header.copy()
        with quiet_htslib():
            declare_symbolic(out_header, symbolic)  # ##ALT lines: no record refers to them by number
        yield copy, out_header
