"""ISM rows to files: Parquet/TSV/CSV/JSONL tables, and the bgzip + tabix TSV in CADD layout.

The CADD layout (``#Chrom  Pos  Ref  Alt  RawScore  PHRED``, one line per scored variant, sorted
by position, bgzip-compressed and tabix-indexed) is what Ensembl VEP ``--custom``, bcftools
annotate and genome browsers read for CADD and GPN-MSA score files. Only ``ok`` rows go into it
(a score file lists scores); ``PHRED`` is empty without a calibration. Like CADD's own
``## CADD ...`` line, a ``## hexamer recipe=window window_placement=centred`` line above the column
names says how the scores were made (tabix skips ``#`` lines). Every file is complete
before it replaces an older one (temp file + rename; the index is renamed after the data).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from hexamer.io.writers import AtomicTarget, TableWriter, table_format
from hexamer.ism.mutagenesis import ISM_COLUMNS

__all__ = [
    "CADD_COLUMNS",
    "CADD_SUFFIXES",
    "cadd_comment",
    "ism_schema",
    "output_format",
    "write_cadd_tsv",
    "write_ism",
]

PathLike = str | os.PathLike[str]
CADD_COLUMNS = ("#Chrom", "Pos", "Ref", "Alt", "RawScore", "PHRED")
#: extensions of the bgzip + tabix TSV
CADD_SUFFIXES = (".tsv.bgz", ".tsv.gz")


def output_format(path: PathLike) -> str:
    """``"cadd"`` for .tsv.bgz/.tsv.gz, else the table format (parquet, tsv, csv, jsonl);
    ``ValueError`` naming the supported extensions."""
    name = os.fspath(path).lower()
    if name.endswith(CADD_SUFFIXES):
        return "cadd"
    try:
        return table_format(path)
    except ValueError as exc:
        raise ValueError(f"{exc}; or {', '.join(CADD_SUFFIXES)} for a bgzip + tabix score file") from exc


def ism_schema() -> Any:
    import pyarrow as pa

    types = {"pos": pa.int64(), "score": pa.float64(), "phred": pa.float64()}
    types.update(n_scored_bp=pa.int64(), n_oov_bp=pa.int64())
    return pa.schema([(c, types.get(c, pa.string())) for c in ISM_COLUMNS])


def write_ism(path: PathLike, rows: Iterable[Mapping[str, Any]]) -> int:
    """Write ISM rows by extension (see :func:`output_format`); returns the lines/rows written."""
    if output_format(path) == "cadd":
        return write_cadd_tsv(path, rows)
    rows = list(rows)
    with TableWriter(path, schema=ism_schema()) as writer:
        if rows:
            writer.write_batch([{c: r.get(c) for c in ISM_COLUMNS} for r in rows])
    return len(rows)


def _number(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"


def cadd_comment(rows: Iterable[Mapping[str, Any]]) -> str | None:
    """The ``## hexamer ...`` line of a score file: the rows' recipe and window placement (a score
    depends on both); None when the rows name no recipe."""
    made = dict.fromkeys((r.get("recipe"), r.get("window_placement")) for r in rows if r.get("recipe"))
    if not made:
        return None
    if len(made) > 1:
        raise ValueError(f"rows made with different recipes or window placements: {sorted(map(str, made))}")
    ((recipe, placement),) = made
    return f"## hexamer recipe={recipe}" + (f" window_placement={placement}" if placement else "")


def write_cadd_tsv(path: PathLike, rows: Iterable[Mapping[str, Any]]) -> int:
    """The ``ok`` rows as a bgzip-compressed, tabix-indexed TSV in CADD layout; returns the
    variant lines written. Rows are sorted by contig (first-seen order) and position."""
    import pysam

    out = os.fspath(path)
    if not out.lower().endswith(CADD_SUFFIXES):
        raise ValueError(f"{out!r}: a tabix score file must end in {' or '.join(CADD_SUFFIXES)}")
    rows = list(rows)
    comment = cadd_comment(rows)
    ok = [r for r in rows if r.get("status") == "ok"]
    contigs = {c: i for i, c in enumerate(dict.fromkeys(str(r["chrom"]) for r in ok))}
    ok.sort(key=lambda r: (contigs[str(r["chrom"])], int(r["pos"])))
    data, index = AtomicTarget(out), AtomicTarget(out + ".tbi")
    plain = AtomicTarget(out + ".txt")
    try:
        with open(plain.tmp, "w", encoding="utf-8") as f:
            if comment is not None:
                f.write(comment + "\n")
            f.write("\t".join(CADD_COLUMNS) + "\n")
            for r in ok:
                f.write(
                    f"{r['chrom']}\t{r['pos']}\t{r['ref']}\t{r['alt']}\t{_number(r['score'])}\t{_number(r.get('phred'))}\n"
                )
        pysam.tabix_compress(str(plain.tmp), str(data.tmp), force=True)
        plain.discard()
        # tabix names the index after the file it indexes: index the temp file, then rename both
        pysam.tabix_index(
            str(data.tmp), seq_col=0, start_col=1, end_col=1, meta_char="#", force=True, zerobased=False
        )
        os.replace(str(data.tmp) + ".tbi", index.tmp)
        data.commit()
        index.commit()
    except BaseException:
        for target in (plain, data, index):
            target.discard()
        if os.path.exists(str(data.tmp) + ".tbi"):
            os.unlink(str(data.tmp) + ".tbi")
        raise
    return len(ok)
