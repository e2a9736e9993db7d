"""Write variant-effect results: the input VCF with INFO fields added, or a table.

* **VCF/BCF** (``.vcf``, ``.vcf.gz``/``.vcf.bgz``, ``.bcf``): every record of the input is written
  as it was, under a header that declares

  - ``HEXAMER_SCORE`` (Number=A, Float): the score of each ALT, ``.`` where it was not scored;
  - ``HEXAMER_STATUS`` (Number=A, String): ``ok``, ``skipped``, ``ref_mismatch`` or ``failed``;
  - ``HEXAMER_REASON`` (Number=A, String): why an ALT is not ``ok`` (percent-encoded, see
    :func:`~hexamer.vep.vcf_header.vcf_escape`), ``.`` for ok ones; absent when all are ok;
  - ``HEXAMER_SCORED_BP``/``HEXAMER_OOV_BP`` (Number=A, Integer): bases of each ALT's windows
    (or context) scored, and lost to ``<oov>`` 6-mers;
  - ``HEXAMER_RECIPE`` (Number=1, String): ``window`` or ``next_base``;

  plus the symbolic ALTs, ``END`` and undeclared tags the records use, and ``##hexamer_*``
  provenance lines. A record without ALT (``.``) carries the status and reason of its one row.
  VCF text stores floats with about 6 significant digits (htslib's ``%g``); tables keep float64.
  A record htslib cannot parse or write back becomes a stand-in record (CHROM, POS, ID, REF, the
  ALTs when known, the HEXAMER fields) when its CHROM and POS can be declared; otherwise its rows
  go to the rejects table :func:`~hexamer.vep.vcf_output.rejects_path`, so records in the VCF plus records rejected equal
  the input's. A bgzipped VCF or a BCF is indexed (``.tbi``/``.csi``) when the records are sorted;
  otherwise a stale index of the same name is removed.
* **Tables** (``.parquet``, ``.tsv``, ``.csv``, ``.jsonl``): one row per (record, ALT) with the
  columns :data:`~hexamer.vep.scoring.ROW_COLUMNS`, in input order, and optionally chosen INFO
  fields of the input (:func:`~hexamer.vep.table_output.resolve_info_fields`) as ``info_<id>`` columns.

Both are written atomically: a killed job leaves the previous file (or none), never half of one;
a VCF, its index and its rejects table are all complete before any of them is renamed into place.
Rows are sorted in memory by ``(record, alt_index)`` first, unless ``presorted=True`` says they
already are: then they are streamed (any iterable, read once), tables in batches of
:data:`~hexamer.vep.table_output.TABLE_BATCH_ROWS` rows and the VCF by walking the input and the rows together, so memory
does not grow with the number of rows (:func:`hexamer.vep.job.run_vep` writes this way).

This module picks the writer by extension; the work is done by :mod:`~hexamer.vep.vcf_output`
(the annotated VCF), :mod:`~hexamer.vep.vcf_header` (its header), :mod:`~hexamer.vep.table_output`
(tables) and :mod:`~hexamer.vep.rows` (the row schema and order).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from hexamer.io import table_format
from hexamer.io.vcf.reader import WriterView
from hexamer.vep.table_output import InfoField, write_rows
from hexamer.vep.vcf_output import VCF_SUFFIXES, VcfWriteResult, write_vcf

__all__ = ["output_kind", "write_vep_output"]

PathLike = str | os.PathLike[str]


def output_kind(path: PathLike) -> str:
    """``"vcf"`` for .vcf/.vcf.gz/.vcf.bgz/.bcf, ``"table"`` for .parquet/.tsv/.csv/.jsonl."""
    name = os.fspath(path).lower()
    if any(name.endswith(s) for s in VCF_SUFFIXES):
        return "vcf"
    table_format(path)  # raises with the list of supported extensions
    return "table"


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
    extra_columns: Mapping[str, str] | None = None,
    source: WriterView | None = None,
) -> VcfWriteResult | int:
    """Write rows as an annotated VCF or a table, by the extension of ``path``.

    ``presorted``, ``contigs`` and ``provenance`` are as for :func:`~hexamer.vep.vcf_output.write_vcf`, ``info`` as for
    :func:`~hexamer.vep.table_output.write_rows` (tables ignore ``contigs`` and ``provenance``; a VCF keeps its INFO anyway).
    ``extra_columns`` (``column -> description``) are float64 values the rows carry beyond the
    standard columns: table columns, or ``HEXAMER_<column>`` INFO fields in a VCF. ``source``
    (VCF only) is what the scoring pass kept of ``vcf_in``, as for :func:`~hexamer.vep.vcf_output.write_vcf`.
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
            extra_columns=extra_columns,
            source=source,
        )
    return write_rows(
        path,
        rows,
        presorted=presorted,
        vcf_in=vcf_in,
        info=info or (),
        calibrated=calibrated,
        extra_columns=tuple(extra_columns or ()),
    )
