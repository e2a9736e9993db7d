"""Write VEP result rows into a copy of the input VCF/BCF as ``HEXAMER_*`` INFO fields.

Every input record is accounted for: written as it was (plus the fields), as a stand-in record
when htslib cannot parse or write it, or, when not even that can be declared, as rows of the
rejects table (:func:`rejects_path`). The VCF, its index and the rejects table are complete
before any of them is renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hexamer.io import TableWriter
from hexamer.io.vcf.header import (
    CONTIG_NAME,
    complete_header,
    declare_end,
    declare_symbolic,
    declared_source,
    quiet_htslib,
)
from hexamer.io.vcf.reader import WriterView, read_vcf
from hexamer.io.writers import AtomicTarget
from hexamer.vep.rows import in_order, row_key, row_schema
from hexamer.vep.settings import ROW_COLUMNS
from hexamer.vep.vcf_header import (
    CALIBRATED_INFO,
    HEXAMER_INFO,
    INFO_OOV_BP,
    INFO_PHRED,
    INFO_RAW,
    INFO_REASON,
    INFO_RECIPE,
    INFO_SCORE,
    INFO_SCORED_BP,
    INFO_STATUS,
    add_hexamer_info,
    add_provenance,
    extra_info,
    extra_info_id,
    vcf_escape,
)

__all__ = ["VCF_SUFFIXES", "VcfWriteResult", "rejects_path", "write_vcf"]

PathLike = str | os.PathLike[str]

VCF_SUFFIXES = {".vcf": "w", ".vcf.gz": "wz", ".vcf.bgz": "wz", ".bcf": "wb"}
_MAX_POS = 2**31 - 2  # htslib's largest position
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG}


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
    extra_columns: Mapping[str, str] | None = None,
    source: WriterView | None = None,
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
    ``HEXAMER_RAW``/``HEXAMER_PHRED``, filled from rows that carry ``phred``. ``extra_columns``
    (``column -> description``: a fine-tuned head's effect per output) adds one Number=A Float INFO
    field per column, ``HEXAMER_<column>`` (:func:`~hexamer.vep.vcf_header.extra_info_id`).
    ``source``: what the pass that scored ``vcf_in`` kept of it (a complete
    :class:`~hexamer.io.vcf.reader.WriterView`), so a text VCF is not read again.

    Every input record is accounted for: written as it was (plus the INFO fields), or, when
    htslib cannot parse or write it, as a stand-in record (CHROM, POS, ID, REF or ``N``, ALT
    ``.``, ``HEXAMER_STATUS``/``HEXAMER_REASON`` of its row) when its CHROM and POS can be
    declared, else its rows go to :func:`rejects_path` (a TSV with the table columns). The VCF,
    its index and the rejects table are complete before any of them replaces an older file.
    """
    out_path = os.fspath(path)
    mode = next((m for s, m in VCF_SUFFIXES.items() if out_path.lower().endswith(s)), None)
    if mode is None:
        raise ValueError(f"{out_path!r}: a VCF output must end in {', '.join(VCF_SUFFIXES)}")
    if presorted:
        ordered: Iterator[Mapping[str, Any]] = in_order(rows)
    else:
        in_memory = list(rows)
        if contigs is None:
            contigs = [r["chrom"] for r in in_memory if r.get("chrom")]
        in_memory.sort(key=row_key)
        ordered = iter(in_memory)
    kept = source is not None and source.complete
    if kept:
        assert source is not None
        header, is_bcf, symbolic = source.header.copy(), source.is_bcf, set(source.symbolic)
    else:
        header, is_bcf, symbolic = complete_header(vcf_in)
    body = source.body.name if kept and source is not None and source.body is not None else None
    # an input scored before (a hexamer output) holds fields of that run: none may be left over
    extra = dict(extra_columns or {})
    known = (*HEXAMER_INFO, *CALIBRATED_INFO, *extra_info(extra))
    stale = tuple(ident for ident, *_ in known if ident in header.info)
    with quiet_htslib():  # htslib warns about each odd contig name again whenever the header changes
        declare_end(header)
        declare_symbolic(header, symbolic)  # a BCF's; a text VCF's are found while it is copied
        add_hexamer_info(header, calibrated, extra)
        for chrom in dict.fromkeys(contigs or ()):
            if chrom and chrom not in header.contigs and CONTIG_NAME.match(chrom):
                header.contigs.add(chrom)
        add_provenance(header, provenance)
    with declared_source(header, is_bcf, vcf_in, body) as (records, header):
        return _write_records(
            out_path,
            mode,
            records,
            header,
            ordered,
            recipe,
            translate=is_bcf,
            stale=stale,
            extra={c: extra_info_id(c) for c in extra},
        )


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


def _hexamer_info(
    rec: Any,
    mine: Mapping[int, Mapping[str, Any]],
    n_alts: int,
    recipe: str,
    extra: Mapping[str, str] | None = None,
) -> None:
    """Set the HEXAMER_* fields: one value per ALT, or, for a record without ALT, the one of its
    single row (so that every record carries its status; htslib then counts the ``.`` of ALT as
    one allele, and the text written is the same)."""
    found = [mine.get(j) for j in range(max(1, n_alts))]
    if n_alts:
        rec.info[INFO_SCORE] = tuple(None if r is None else r.get("score") for r in found)
        if any(r is not None and "phred" in r for r in found):  # rows of a calibrated run
            rec.info[INFO_RAW] = rec.info[INFO_SCORE]
            rec.info[INFO_PHRED] = tuple(None if r is None else r.get("phred") for r in found)
        for column, ident in (extra or {}).items():
            values = tuple(None if r is None else r.get(column) for r in found)
            if any(v is not None for v in values):
                rec.info[ident] = values
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
        if not CONTIG_NAME.match(chrom) or chrom not in header.contigs or not 1 <= pos <= _MAX_POS:
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
    extra: Mapping[str, str] | None = None,
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
        with pysam.VariantFile(str(data.tmp), mode, header=header) as out, quiet_htslib():
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
                        _hexamer_info(rec, mine, len(rec.alts or ()), recipe, extra)
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
