"""Write variant-effect results: the input VCF with INFO fields added, or a table.

* **VCF/BCF** (``.vcf``, ``.vcf.gz``/``.vcf.bgz``, ``.bcf``): every record of the input is written
  as it was, translated to a header that declares

  - ``HEXAMER_SCORE`` (Number=A, Float): the score of each ALT, ``.`` where it was not scored;
  - ``HEXAMER_STATUS`` (Number=A, String): ``ok``, ``skipped``, ``ref_mismatch`` or ``failed``;
  - ``HEXAMER_SCORED_BP``/``HEXAMER_OOV_BP`` (Number=A, Integer): bases of each ALT's windows
    (or context) scored, and lost to ``<oov>`` 6-mers;
  - ``HEXAMER_RECIPE`` (Number=1, String): ``window`` or ``next_base``.

  A record without ALT (``.``) gets only ``HEXAMER_RECIPE`` (a Number=A field has no slot for it).
  VCF text stores floats with about 6 significant digits (htslib's ``%g``); tables keep float64.
  Lines htslib cannot parse cannot be written back; they are counted in the result and kept, with
  their reason, in table outputs. A bgzipped VCF or a BCF is indexed (``.tbi``/``.csi``) when the
  records are sorted; otherwise a stale index of the same name is removed.
* **Tables** (``.parquet``, ``.tsv``, ``.csv``, ``.jsonl``): one row per (record, ALT) with the
  columns :data:`~hexamer.vep.engine.ROW_COLUMNS`, in input order.

Both are written atomically: a killed job leaves the previous file (or none), never half of one.
Rows are sorted in memory by ``(record, alt_index)`` first, unless ``presorted=True`` says they
already are: then they are streamed (any iterable, read once), tables in batches of
:data:`TABLE_BATCH_ROWS` rows and the VCF by walking the input and the rows together, so memory
does not grow with the number of rows (:func:`hexamer.vep.resume.run_vep` writes this way).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from hexamer.io import TableWriter, atomic_path, table_format
from hexamer.vep.engine import ROW_COLUMNS
from hexamer.vep.variants import iter_data_lines, open_variant_file, read_vcf

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "INFO_RECIPE",
    "INFO_SCORE",
    "INFO_STATUS",
    "TABLE_BATCH_ROWS",
    "VcfWriteResult",
    "output_kind",
    "row_schema",
    "write_rows",
    "write_vcf",
    "write_vep_output",
]

PathLike = str | os.PathLike[str]

INFO_SCORE = "HEXAMER_SCORE"
INFO_STATUS = "HEXAMER_STATUS"
INFO_RECIPE = "HEXAMER_RECIPE"
INFO_SCORED_BP = "HEXAMER_SCORED_BP"
INFO_OOV_BP = "HEXAMER_OOV_BP"
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


def write_rows(path: PathLike, rows: Iterable[Mapping[str, Any]], *, presorted: bool = False) -> int:
    """Write result rows as a table (format by extension), in input order; returns the row count.

    With ``presorted=True`` the rows must already be sorted by ``(record, alt_index)`` (else
    ``ValueError``, and nothing is written) and are streamed in batches of
    :data:`TABLE_BATCH_ROWS`; otherwise they are sorted in memory first.
    """
    ordered = _ordered(rows, presorted)
    n = 0
    with TableWriter(path, format=table_format(path), schema=row_schema()) as writer:
        while batch := [{c: row.get(c) for c in ROW_COLUMNS} for row in islice(ordered, TABLE_BATCH_ROWS)]:
            writer.write_batch(batch)
            n += len(batch)
    return n


@dataclass
class VcfWriteResult:
    """What :func:`write_vcf` wrote: records, malformed input lines left out, and the index made."""

    n_records: int
    n_malformed: int
    index: str | None


def _index_path(path: str, mode: str) -> str:
    return path + (".csi" if mode == "wb" else ".tbi")


def _add_info(header: Any) -> None:
    for ident, number, kind, description in _INFO:
        if ident in header.info:
            have = header.info[ident]
            if str(have.number) != number or have.type != kind:
                raise ValueError(
                    f"the input header already defines INFO {ident} as Number={have.number},Type={have.type}; "
                    f"hexamer writes Number={number},Type={kind}"
                )
            continue
        header.info.add(ident, number, kind, description)


_DUMMY_END = re.compile(r'^##INFO=<ID=END,Number=1,Type=String,Description="Dummy">$', re.MULTILINE)
_DECLARED_END = (
    '##INFO=<ID=END,Number=1,Type=Integer,Description="End position (used but not declared in the input)">'
)


def _complete_header(vcf_in: PathLike) -> tuple[Any, bool]:
    """``(header, is_bcf)``: the input header plus every contig/INFO/FILTER/FORMAT tag htslib
    added while reading records that use undeclared ones (it declares them as String "Dummy")."""
    import pysam

    with open_variant_file(vcf_in) as source:
        old = pysam.set_verbosity(0)
        try:
            it = iter(source)
            while True:
                try:
                    next(it)
                except StopIteration:
                    break
                except (OSError, ValueError):
                    continue  # a malformed line: reported by the scoring pass, not written
            return source.header.copy(), source.format == "BCF"
        finally:
            pysam.set_verbosity(old)


@contextlib.contextmanager
def _declared_source(vcf_in: PathLike) -> Iterator[tuple[str, Any]]:
    """``(path, header)`` to read the records from for writing.

    htslib marks a record parsed with an undeclared tag, and ``bcf_translate`` ends the whole
    process on such a record. So a text VCF is re-read from a temporary copy whose header
    declares every tag its records use (``END`` as the Integer the spec makes it, which pysam
    needs to write it back). A BCF cannot have undeclared tags and is read as it is.
    """
    header, is_bcf = _complete_header(vcf_in)
    if is_bcf:
        yield os.fspath(vcf_in), header
        return
    with tempfile.TemporaryDirectory(prefix="hexamer-vcf-") as tmpdir:
        copy = os.path.join(tmpdir, "declared.vcf")
        with open(copy, "wb") as f:
            f.write(_DUMMY_END.sub(_DECLARED_END, str(header)).encode("utf-8"))
            for line in iter_data_lines(vcf_in):
                f.write(line)
        with open_variant_file(copy) as declared:
            yield copy, declared.header.copy()


def write_vcf(
    path: PathLike,
    vcf_in: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    recipe: str,
    presorted: bool = False,
    contigs: Iterable[str] | None = None,
) -> VcfWriteResult:
    """Write ``vcf_in`` with the ``HEXAMER_*`` INFO fields of ``rows`` (from :func:`score_variants`).

    Rows are matched to records by ``(record, alt_index)``; the output format follows the
    extension (.vcf, .vcf.gz/.vcf.bgz, .bcf). With ``presorted=True`` the rows must be sorted by
    ``(record, alt_index)`` and are read once, alongside the input records (memory does not grow
    with their number); otherwise they are sorted in memory first. ``contigs`` are the rows'
    chromosomes, declared in the header when it lacks them; by default they are taken from the
    rows, which needs them in memory, so a presorted stream without ``contigs`` declares none
    (every record written keeps its own contig, already declared by the input's header).
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
    with _declared_source(vcf_in) as (source, header):
        _add_info(header)
        for chrom in dict.fromkeys(contigs or ()):
            if chrom and chrom not in header.contigs:
                header.contigs.add(chrom)
        return _write_records(out_path, mode, source, header, ordered, recipe)


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


def _write_records(
    out_path: str,
    mode: str,
    source: str,
    header: Any,
    rows: Iterator[Mapping[str, Any]],
    recipe: str,
) -> VcfWriteResult:
    import pysam

    cursor = _RowCursor(rows)
    n_records = n_malformed = 0
    seen_contigs: list[str] = []
    last_pos = 0
    in_order = True
    with atomic_path(out_path) as tmp:
        with pysam.VariantFile(str(tmp), mode, header=header) as out:
            for item in read_vcf(source, keep_records=True):
                if item.problem is not None or item.record is None:
                    n_malformed += 1
                    continue
                rec = item.record
                rec.translate(header)
                n_alts = len(rec.alts or ())
                if n_alts:
                    mine = cursor.take(item.index)
                    found = [mine.get(j) for j in range(n_alts)]
                    rec.info[INFO_SCORE] = tuple(None if r is None else r.get("score") for r in found)
                    rec.info[INFO_STATUS] = tuple("." if r is None else str(r.get("status")) for r in found)
                    for info, column in ((INFO_SCORED_BP, "n_scored_bp"), (INFO_OOV_BP, "n_oov_bp")):
                        rec.info[info] = tuple(None if r is None else r.get(column) for r in found)
                rec.info[INFO_RECIPE] = recipe
                out.write(rec)
                n_records += 1
                if not seen_contigs or seen_contigs[-1] != rec.chrom:
                    in_order = in_order and rec.chrom not in seen_contigs
                    seen_contigs.append(rec.chrom)
                elif rec.pos < last_pos:
                    in_order = False
                last_pos = rec.pos
        index = _index_path(out_path, mode)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index)  # about to be stale: the data it indexes is being replaced
    if mode == "w" or not in_order:
        return VcfWriteResult(n_records, n_malformed, None)
    with atomic_path(index) as itmp:
        pysam.tabix_index(out_path, preset="vcf", force=True, index=str(itmp), csi=mode == "wb")
    return VcfWriteResult(n_records, n_malformed, index)


def write_vep_output(
    path: PathLike,
    vcf_in: PathLike,
    rows: Iterable[Mapping[str, Any]],
    *,
    recipe: str,
    presorted: bool = False,
    contigs: Iterable[str] | None = None,
) -> VcfWriteResult | int:
    """Write rows as an annotated VCF or a table, by the extension of ``path``.

    ``presorted`` and ``contigs`` are as for :func:`write_vcf` (tables ignore ``contigs``).
    """
    if output_kind(path) == "vcf":
        return write_vcf(path, vcf_in, rows, recipe=recipe, presorted=presorted, contigs=contigs)
    return write_rows(path, rows, presorted=presorted)
