"""Write variant-effect results: the input VCF with INFO fields added, or a table.

* **VCF/BCF** (``.vcf``, ``.vcf.gz``/``.vcf.bgz``, ``.bcf``): every record of the input is written
  as it was, under a header that declares

  - ``HEXAMER_SCORE`` (Number=A, Float): the score of each ALT, ``.`` where it was not scored;
  - ``HEXAMER_STATUS`` (Number=A, String): ``ok``, ``skipped``, ``ref_mismatch`` or ``failed``;
  - ``HEXAMER_REASON`` (Number=A, String): why an ALT is not ``ok`` (percent-encoded, see
    :func:`vcf_escape`), ``.`` for ok ones; absent when all are ok;
  - ``HEXAMER_SCORED_BP``/``HEXAMER_OOV_BP`` (Number=A, Integer): bases of each ALT's windows
    (or context) scored, and lost to ``<oov>`` 6-mers;
  - ``HEXAMER_RECIPE`` (Number=1, String): ``window`` or ``next_base``;

  plus the symbolic ALTs, ``END`` and undeclared tags the records use, and ``##hexamer_*``
  provenance lines. A record without ALT (``.``) carries the status and reason of its one row.
  VCF text stores floats with about 6 significant digits (htslib's ``%g``); tables keep float64.
  A record htslib cannot parse or write back becomes a stand-in record (CHROM, POS, ID, REF, the
  ALTs when known, the HEXAMER fields) when its CHROM and POS can be declared; otherwise its rows
  go to the rejects table :func:`rejects_path`, so records in the VCF plus records rejected equal
  the input's. A bgzipped VCF or a BCF is indexed (``.tbi``/``.csi``) when the records are sorted;
  otherwise a stale index of the same name is removed.
* **Tables** (``.parquet``, ``.tsv``, ``.csv``, ``.jsonl``): one row per (record, ALT) with the
  columns :data:`~hexamer.vep.engine.ROW_COLUMNS`, in input order, and optionally chosen INFO
  fields of the input (:func:`resolve_info_fields`) as ``info_<id>`` columns.

Both are written atomically: a killed job leaves the previous file (or none), never half of one;
a VCF, its index and its rejects table are all complete before any of them is renamed into place.
Rows are sorted in memory by ``(record, alt_index)`` first, unless ``presorted=True`` says they
already are: then they are streamed (any iterable, read once), tables in batches of
:data:`TABLE_BATCH_ROWS` rows and the VCF by walking the input and the rows together, so memory
does not grow with the number of rows (:func:`hexamer.vep.resume.run_vep` writes this way).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from hexamer.io import TableWriter, table_format
from hexamer.io.writers import AtomicTarget
from hexamer.vep.engine import ROW_COLUMNS
from hexamer.vep.variants import iter_data_lines, open_variant_file, read_vcf

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "INFO_COLUMN_PREFIX",
    "INFO_PHRED",
    "INFO_RAW",
    "INFO_REASON",
    "INFO_RECIPE",
    "INFO_SCORE",
    "INFO_STATUS",
    "TABLE_BATCH_ROWS",
    "InfoField",
    "VcfWriteResult",
    "output_kind",
    "rejects_path",
    "resolve_info_fields",
    "row_schema",
    "vcf_escape",
    "write_rows",
    "write_vcf",
    "write_vep_output",
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
_CALIBRATED_INFO = (
    (INFO_RAW, "A", "Float", "hexamer raw score of each ALT allele (the same as HEXAMER_SCORE)"),
    (
        INFO_PHRED,
        "A",
        "Float",
        "hexamer PHRED-like score of each ALT allele: -10*log10(share of background SNVs at least as "
        "deleterious); higher = the alt is less likely under the model (docs/ism.md)",
    ),
)
_INFO = (
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
_VCF_SUFFIXES = {".vcf": "w", ".vcf.gz": "wz", ".vcf.bgz": "wz", ".bcf": "wb"}
#: Rows per batch (and Parquet row group) when a table is written.
TABLE_BATCH_ROWS = 16_384


def output_kind(path: PathLike) -> str:
    """``"vcf"`` for .vcf/.vcf.gz/.vcf.bgz/.bcf, ``"table"`` for .parquet/.tsv/.csv/.jsonl."""
    name = os.fspath(path).lower()
    if any(name.endswith(s) for s in _VCF_SUFFIXES):
        return "vcf"
    table_format(path)  # raises with the list of supported extensions
    return "table"


def row_schema() -> pa.Schema:
    """Arrow schema of a result row (fixed, so every chunk and output agree on types)."""
    import pyarrow as pa

    types = {"record": pa.int64(), "alt_index": pa.int64(), "pos": pa.int64(), "score": pa.float64()}
    types.update(n_scored_bp=pa.int64(), n_oov_bp=pa.int64())
    return pa.schema([(name, types.get(name, pa.string())) for name in ROW_COLUMNS])


def _key(row: Mapping[str, Any]) -> tuple[int, int]:
    return row["record"], row["alt_index"]


def _in_order(rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """``rows`` as they come, checked to be sorted by ``(record, alt_index)`` (ties allowed)."""
    last: tuple[int, int] | None = None
    for row in rows:
        key = _key(row)
        if last is not None and key < last:
            raise ValueError(
                f"presorted rows are not sorted by (record, alt_index): {key} comes after {last}"
            )
        last = key
        yield row


def _ordered(rows: Iterable[Mapping[str, Any]], presorted: bool) -> Iterator[Mapping[str, Any]]:
    """Rows in ``(record, alt_index)`` order: streamed when ``presorted``, else sorted in memory
    (a stable sort, so of rows with the same key the last one given comes last)."""
    return _in_order(rows) if presorted else iter(sorted(rows, key=_key))


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
        """This field of a pysam record for the row of ALT ``alt_index`` (None when absent)."""
        try:
            if self.type == "Flag":
                return self.id in rec.info
            if self.id not in rec.info:
                return None
            value = rec.info[self.id]
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
        header, _, _ = _complete_header(vcf_in)
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


def _with_info(
    rows: Iterator[Mapping[str, Any]], vcf_in: PathLike, fields: list[InfoField]
) -> Iterator[dict[str, Any]]:
    """Rows (sorted by record) with the ``info_*`` columns of their input record, read alongside."""
    records = read_vcf(vcf_in, keep_records=True)
    current = None
    for row in rows:
        while current is None or current.index < row["record"]:
            current = next(records, None)
            if current is None:
                break
        rec = current.record if current is not None and current.index == row["record"] else None
        out = dict(row)
        for field in fields:
            out[field.column] = None if rec is None else field.value(rec, int(row["alt_index"]))
        yield out


def write_rows(
    path: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    presorted: bool = False,
    vcf_in: PathLike | None = None,
    info: Iterable[InfoField] = (),
    calibrated: bool = False,
) -> int:
    """Write result rows as a table (format by extension), in input order; returns the row count.

    With ``presorted=True`` the rows must already be sorted by ``(record, alt_index)`` (else
    ``ValueError``, and nothing is written) and are streamed in batches of
    :data:`TABLE_BATCH_ROWS`; otherwise they are sorted in memory first. ``info`` fields (from
    :func:`resolve_info_fields`) of the input ``vcf_in`` are added as ``info_<id>`` columns;
    ``calibrated`` adds the rows' ``phred`` column.
    """
    import pyarrow as pa

    info = list(info)
    ordered: Iterator[Mapping[str, Any]] = _ordered(rows, presorted)
    schema = row_schema()
    if calibrated:
        schema = schema.append(pa.field("phred", pa.float64()))
    if info:
        if vcf_in is None:
            raise ValueError("info fields need the input VCF (vcf_in)")
        ordered = _with_info(ordered, vcf_in, info)
        schema = pa.schema([*schema, *(pa.field(f.column, f.arrow_type()) for f in info)])
    columns = schema.names
    n = 0
    with TableWriter(path, format=table_format(path), schema=schema) as writer:
        while batch := [{c: row.get(c) for c in columns} for row in islice(ordered, TABLE_BATCH_ROWS)]:
            writer.write_batch(batch)
            n += len(batch)
    return n


@dataclass
class VcfWriteResult:
    """What :func:`write_vcf` wrote.

    ``n_records`` records went into the VCF and ``n_rejected`` input records (none of them lost)
    into the rejects table ``rejects`` instead, so the two add up to the input's records.
    ``n_malformed`` counts the input lines htslib could not parse (written as ``failed`` records
    where their CHROM and POS could be read, else rejected). ``index`` is the index made, if any.
    """

    n_records: int
    n_malformed: int
    index: str | None
    n_rejected: int = 0
    rejects: str | None = None


def rejects_path(path: PathLike) -> str:
    """The companion table of a VCF output for input records it cannot hold: ``PATH.rejects.tsv``."""
    return os.fspath(path) + ".rejects.tsv"


def _index_path(path: str, mode: str) -> str:
    return path + (".csi" if mode == "wb" else ".tbi")


_PERCENT = str.maketrans(
    {**{chr(c): f"%{c:02X}" for c in (*range(32), 127)}, **{c: f"%{ord(c):02X}" for c in "%,;= "}}
)


def vcf_escape(text: str) -> str:
    """``text`` as an INFO value: ``%``, ``,``, ``;``, ``=``, spaces and control characters
    percent-encoded (VCF 4.3 section 1.2; spaces too, which VCF 4.2 readers refuse in INFO).
    ``urllib.parse.unquote`` gives the text back."""
    return text.translate(_PERCENT)


def _add_info(header: Any, calibrated: bool = False) -> None:
    for ident, number, kind, description in (*_INFO, *(_CALIBRATED_INFO if calibrated else ())):
        if ident in header.info:
            have = header.info[ident]
            if str(have.number) != number or have.type != kind:
                raise ValueError(
                    f"the input header already defines INFO {ident} as Number={have.number},Type={have.type}; "
                    f"hexamer writes Number={number},Type={kind}"
                )
            continue
        header.info.add(ident, number, kind, description)


def _add_provenance(header: Any, provenance: Mapping[str, str] | None) -> None:
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
_CONTIG_NAME = re.compile(r"^[0-9A-Za-z!#$%&+./:;?@^_|~-][0-9A-Za-z!#$%&*+./:;=?@^_|~-]*$")
_MAX_POS = 2**31 - 2  # htslib's largest position
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG}


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """htslib's own messages off (what they report is reported as statuses and reasons)."""
    import pysam

    old = pysam.set_verbosity(0)
    try:
        yield
    finally:
        pysam.set_verbosity(old)


def _complete_header(vcf_in: PathLike) -> tuple[Any, bool, set[str]]:
    """``(header, is_bcf, symbolic)``: the input header plus every contig/INFO/FILTER/FORMAT tag
    htslib added while reading records that use undeclared ones (it declares them as String
    "Dummy"); for a BCF also the symbolic ALT alleles (``<DEL>``) its records use (a text VCF's
    are found while it is copied, see :func:`_declared_source`)."""
    symbolic: set[str] = set()
    with open_variant_file(vcf_in) as source, _quiet():
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


def _declare_end(header: Any) -> None:
    """htslib refuses to format a record with a symbolic allele (``<DEL>``) while ``END`` is
    undeclared, so it is declared (an Integer, as the spec reserves it) when the input did not;
    records without symbolic alleles or an END do not get one."""
    if "END" not in header.info:
        header.info.add("END", 1, "Integer", "End position of the variant (declared by hexamer)")


def _declare_symbolic(header: Any, symbolic: Iterable[str]) -> None:
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
def _declared_source(header: Any, is_bcf: bool, vcf_in: PathLike) -> Iterator[tuple[str, Any]]:
    """``(path, header)``: where to read the records from for writing, and the output header.

    htslib marks a record parsed with an undeclared tag, and ``bcf_translate`` ends the whole
    process on such a record. So a text VCF is re-read from a temporary copy whose header is the
    output header (``header``: completed by :func:`_complete_header`, so it declares every tag
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
        with _quiet():
            _declare_symbolic(out_header, symbolic)  # ##ALT lines: no record refers to them by number
        yield copy, out_header


def write_vcf(
    path: PathLike,
    vcf_in: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    recipe: str,
    presorted: bool = False,
    contigs: Iterable[str] | None = None,
    provenance: Mapping[str, str] | None = None,
    calibrated: bool = False,
) -> VcfWriteResult:
    """Write ``vcf_in`` with the ``HEXAMER_*`` INFO fields of ``rows`` (from :func:`score_variants`).

    Rows are matched to records by ``(record, alt_index)``; the output format follows the
    extension (.vcf, .vcf.gz/.vcf.bgz, .bcf). With ``presorted=True`` the rows must be sorted by
    ``(record, alt_index)`` and are read once, alongside the input records (memory does not grow
    with their number); otherwise they are sorted in memory first. ``contigs`` are the rows'
    chromosomes, declared in the header when it lacks them; by default they are taken from the
    rows, which needs them in memory, so a presorted stream without ``contigs`` declares none
    (every record written keeps its own contig, already declared by the input's header).
    ``provenance`` items become ``##hexamer_KEY=VALUE`` header lines. ``calibrated`` declares
    ``HEXAMER_RAW``/``HEXAMER_PHRED``, filled from rows that carry ``phred``.

    Every input record is accounted for: written as it was (plus the INFO fields), or, when
    htslib cannot parse or write it, as a stand-in record (CHROM, POS, ID, REF or ``N``, ALT
    ``.``, ``HEXAMER_STATUS``/``HEXAMER_REASON`` of its row) when its CHROM and POS can be
    declared, else its rows go to :func:`rejects_path` (a TSV with the table columns). The VCF,
    its index and the rejects table are complete before any of them replaces an older file.
    """
    out_path = os.fspath(path)
    mode = next((m for s, m in _VCF_SUFFIXES.items() if out_path.lower().endswith(s)), None)
    if mode is None:
        raise ValueError(f"{out_path!r}: a VCF output must end in {', '.join(_VCF_SUFFIXES)}")
    if presorted:
        ordered: Iterator[Mapping[str, Any]] = _in_order(rows)
    else:
        in_memory = list(rows)
        if contigs is None:
            contigs = [r["chrom"] for r in in_memory if r.get("chrom")]
        in_memory.sort(key=_key)
        ordered = iter(in_memory)
    header, is_bcf, symbolic = _complete_header(vcf_in)
    # an input scored before (a hexamer output) holds fields of that run: none may be left over
    stale = tuple(ident for ident, *_ in (*_INFO, *_CALIBRATED_INFO) if ident in header.info)
    with _quiet():  # htslib warns about each odd contig name again whenever the header changes
        _declare_end(header)
        _declare_symbolic(header, symbolic)  # a BCF's; a text VCF's are found while it is copied
        _add_info(header, calibrated)
        for chrom in dict.fromkeys(contigs or ()):
            if chrom and chrom not in header.contigs and _CONTIG_NAME.match(chrom):
                header.contigs.add(chrom)
        _add_provenance(header, provenance)
    with _declared_source(header, is_bcf, vcf_in) as (source, header):
        return _write_records(out_path, mode, source, header, ordered, recipe, translate=is_bcf, stale=stale)


class _RowCursor:
    """Walks rows sorted by ``(record, alt_index)`` along the input records (increasing index)."""

    def __init__(self, rows: Iterator[Mapping[str, Any]]) -> None:
        self._rows = rows
        self._next = next(rows, None)

    def take(self, record: int) -> dict[int, Mapping[str, Any]]:
        """The rows of ``record`` by ALT index; rows of records before it are passed over."""
        found: dict[int, Mapping[str, Any]] = {}
        while self._next is not None and self._next["record"] <= record:
            if self._next["record"] == record:
                found[self._next["alt_index"]] = self._next  # a repeated key: the last one wins
            self._next = next(self._rows, None)
        return found

    def rest(self) -> Iterator[tuple[int, dict[int, Mapping[str, Any]]]]:
        """``(record, rows)`` for the records after the last one taken (rows the input walk did
        not reach)."""
        while self._next is not None:
            record = self._next["record"]
            yield record, self.take(record)


def _hexamer_info(rec: Any, mine: Mapping[int, Mapping[str, Any]], n_alts: int, recipe: str) -> None:
    """Set the HEXAMER_* fields: one value per ALT, or, for a record without ALT, the one of its
    single row (so that every record carries its status; htslib then counts the ``.`` of ALT as
    one allele, and the text written is the same)."""
    found = [mine.get(j) for j in range(max(1, n_alts))]
    if n_alts:
        rec.info[INFO_SCORE] = tuple(None if r is None else r.get("score") for r in found)
        if any(r is not None and "phred" in r for r in found):  # rows of a calibrated run
            rec.info[INFO_RAW] = rec.info[INFO_SCORE]
            rec.info[INFO_PHRED] = tuple(None if r is None else r.get("phred") for r in found)
    elif found[0] is not None:
        stop = rec.stop
        rec.alleles = (rec.ref or "N", ".")
        if rec.stop != stop:  # pysam resets the end (an END of a reference block) with the alleles
            rec.stop = stop
    if n_alts or found[0] is not None:
        rec.info[INFO_STATUS] = tuple("." if r is None else str(r.get("status")) for r in found)
        for info, column in ((INFO_SCORED_BP, "n_scored_bp"), (INFO_OOV_BP, "n_oov_bp")):
            rec.info[info] = tuple(None if r is None else r.get(column) for r in found)
        if any(r is not None and r.get("reason") for r in found):
            rec.info[INFO_REASON] = tuple(
                vcf_escape(str(r["reason"])) if r is not None and r.get("reason") else "." for r in found
            )
    rec.info[INFO_RECIPE] = recipe


def _stand_in(header: Any, item: Any, mine: Mapping[int, Mapping[str, Any]], recipe: str) -> Any:
    """A minimal record for an input record that cannot be written as it was, or None when
    there is none (its rows then go to the rejects table).

    CHROM, POS, ID and the HEXAMER_* fields, without the input's QUAL/FILTER/INFO/samples. A
    record htslib parsed keeps REF and ALT (one status per ALT); a line it could not parse gets
    its REF (or ``N``) and ALT ``.`` with the status of its single row. None when CHROM or POS
    cannot be declared in a VCF, or a record of several rows cannot keep its ALTs.
    """
    try:
        first = mine.get(0) or next(iter(mine.values()), None)
        chrom = str((first or {}).get("chrom") or item.chrom or "")
        pos = int((first or {}).get("pos") or item.pos or 0)
        if not _CONTIG_NAME.match(chrom) or chrom not in header.contigs or not 1 <= pos <= _MAX_POS:
            return None
        ref = str((first or {}).get("ref") or item.ref or "")
        ref = ref.upper() if re.fullmatch(r"[A-Za-z]+", ref) else "N"
        ident = str((first or {}).get("id") or item.id or "")
        alts = tuple(getattr(item, "alts", None) or ())
        if alts and len(alts) >= len(mine):
            alleles, rows, n_alts = (ref, *alts), mine, len(alts)
        elif len(mine) <= 1:
            row = dict(first) if first is not None else _failed_row(item)
            alleles, rows, n_alts = (ref, "."), {0: row}, 0
        else:
            return None
        rec = header.new_record(
            contig=chrom,
            start=pos - 1,
            alleles=alleles,
            id=ident if re.fullmatch(r"[^\s;.][^\s;]*", ident) else None,
        )
        _hexamer_info(rec, rows, n_alts, recipe)
        return rec
    except (ValueError, TypeError, KeyError, OSError):
        return None


def _failed_row(item: Any) -> dict[str, Any]:
    """The row of a record no row was given for (``write_vcf`` called with partial rows)."""
    return {
        "record": item.index,
        "alt_index": 0,
        "id": item.id,
        "chrom": item.chrom,
        "pos": item.pos,
        "ref": item.ref,
        "alt": "",
        "status": "failed",
        "reason": item.problem or "the record could not be written as VCF",
    }


def _try_write(out: Any, rec: Any) -> bool:
    """Write one record; False (and nothing written) when htslib or pysam refuses it. An error
    of the disk (full, read-only, I/O) is not the record's fault and is raised."""
    try:
        out.write(rec)
        return True
    except OSError as exc:
        if exc.errno in _DISK_ERRORS:
            raise
        return False
    except (ValueError, TypeError):
        return False


class _Order:
    """Tracks whether the records written are sorted (contigs in blocks, positions increasing)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.last_pos = 0
        self.sorted = True

    def add(self, chrom: str, pos: int) -> None:
        if not self.seen or self.seen[-1] != chrom:
            self.sorted = self.sorted and chrom not in self.seen
            self.seen.append(chrom)
        elif pos < self.last_pos:
            self.sorted = False
        self.last_pos = pos


def _write_records(
    out_path: str,
    mode: str,
    source: str,
    header: Any,
    rows: Iterator[Mapping[str, Any]],
    recipe: str,
    *,
    translate: bool,
    stale: tuple[str, ...] = (),
) -> VcfWriteResult:
    import pysam

    cursor = _RowCursor(rows)
    n_records = n_malformed = 0
    rejected: list[Mapping[str, Any]] = []
    rejected_records: set[int] = set()
    order = _Order()

    def place(out: Any, item: Any, mine: dict[int, Mapping[str, Any]]) -> None:
        """A record that cannot be written as it was: its stand-in, or its rows to the rejects."""
        nonlocal n_records
        stand_in = _stand_in(header, item, mine, recipe)
        if stand_in is not None and _try_write(out, stand_in):
            n_records += 1
            order.add(stand_in.chrom, stand_in.pos)
            return
        rejected.extend(mine[j] for j in sorted(mine)) if mine else rejected.append(_failed_row(item))
        rejected_records.add(item.index)

    data = AtomicTarget(out_path)
    index_target: AtomicTarget | None = None
    rejects_writer: TableWriter | None = None
    try:
        with pysam.VariantFile(str(data.tmp), mode, header=header) as out, _quiet():
            for item in read_vcf(source, keep_records=True):
                mine = cursor.take(item.index)
                rec = None
                if item.problem is not None or item.record is None:
                    n_malformed += 1
                else:
                    rec = item.record
                    try:
                        if translate:
                            rec.translate(header)
                        for ident in stale:
                            if ident in rec.info:
                                del rec.info[ident]
                        _hexamer_info(rec, mine, len(rec.alts or ()), recipe)
                    except (OSError, ValueError, KeyError, TypeError):
                        rec = None
                if rec is not None and _try_write(out, rec):
                    n_records += 1
                    order.add(rec.chrom, rec.pos)
                else:
                    place(out, item, mine)
            for record, mine in cursor.rest():
                first = next(iter(mine.values()))
                item = _Missing(record, str(first.get("chrom") or ""), int(first.get("pos") or 0))
                place(out, item, mine)
        index = _index_path(out_path, mode)
        if mode != "w" and order.sorted:
            index_target = AtomicTarget(index)
            pysam.tabix_index(
                str(data.tmp), preset="vcf", force=True, index=str(index_target.tmp), csi=mode == "wb"
            )
        if rejected:
            rejects_writer = TableWriter(
                rejects_path(out_path), format="tsv", schema=row_schema(), deferred=True
            )
            rejects_writer.write_batch([{c: row.get(c) for c in ROW_COLUMNS} for row in rejected])
            rejects_writer.close()
        # everything is complete: publish, the VCF after a stale index is gone and before its index
        if rejects_writer is not None:
            rejects_writer.commit()
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(rejects_path(out_path))  # from an earlier run: it would describe another file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index)
        data.commit()
        if index_target is not None:
            index_target.commit()
    except BaseException:
        data.discard()
        if index_target is not None:
            index_target.discard()
        if rejects_writer is not None:
            rejects_writer.abort()
        raise
    return VcfWriteResult(
        n_records,
        n_malformed,
        index if index_target is not None else None,
        n_rejected=len(rejected_records),
        rejects=rejects_path(out_path) if rejected else None,
    )


@dataclass
class _Missing:
    """A record the rows name but the input walk did not reach (as :class:`VcfRecord` for
    :func:`_stand_in`)."""

    index: int
    chrom: str
    pos: int
    id: str = ""
    ref: str = ""
    problem: str | None = None


def write_vep_output(
    path: PathLike,
    vcf_in: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    recipe: str,
    presorted: bool = False,
    contigs: Iterable[str] | None = None,
    provenance: Mapping[str, str] | None = None,
    info: Iterable[InfoField] | None = None,
    calibrated: bool = False,
) -> VcfWriteResult | int:
    """Write rows as an annotated VCF or a table, by the extension of ``path``.

    ``presorted``, ``contigs`` and ``provenance`` are as for :func:`write_vcf`, ``info`` as for
    :func:`write_rows` (tables ignore ``contigs`` and ``provenance``; a VCF keeps its INFO anyway).
    """
    if output_kind(path) == "vcf":
        return write_vcf(
            path,
            vcf_in,
            rows,
            recipe=recipe,
            presorted=presorted,
            contigs=contigs,
            provenance=provenance,
            calibrated=calibrated,
        )
    return write_rows(path, rows, presorted=presorted, vcf_in=vcf_in, info=info or (), calibrated=calibrated)
