"""``hexamer report``: one HTML file for reviewing scored variants, opened from disk with no
server and no network.

The page holds a sortable table (one row per ALT allele: score, PHRED, status, reason and the
other INFO fields the VCF carries) and igv.js itself (the shipped copy, inlined). For each
variant it embeds the reference bases of a window around it and, per bigWig given, the values in
that window (4 significant digits); clicking a row loads that window into igv.js, with the
variants in it drawn as features coloured by score. Nothing is read from the input files after
the report is written.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.view.assets import fill, igv_js_path, template
from hexamer.view.files import ViewError, ViewFile, check_contigs, classify, contig_key, fasta_contigs
from hexamer.view.page import script_json

__all__ = ["MAX_FLANK", "ReportResult", "build_report"]

MAX_FLANK = 5_000
_OWN = ("HEXAMER_SCORE", "HEXAMER_PHRED", "HEXAMER_STATUS", "HEXAMER_REASON")
_COLUMNS = ("chrom", "pos", "id", "ref", "alt", "score", "phred", "status", "reason")


@dataclass
class ReportResult:
    path: Path
    n_records: int
    n_rows: int
    n_bytes: int
    tracks: list[str] = field(default_factory=list)


def _allele_value(value: Any, i: int) -> Any:
    if isinstance(value, tuple):
        return value[i] if i < len(value) else None
    return value


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else None
    if isinstance(value, tuple):
        return ",".join("." if v is None else str(v) for v in value)
    return value if isinstance(value, int | str) else str(value)


def _track_values(readers: Sequence[Any], contig: str, start: int, end: int) -> list[list[float | None]]:
    out = []
    for bw in readers:
        if contig not in bw.chroms():
            out.append([None] * (end - start))
            continue
        vals = bw.values(contig, start, min(end, bw.chroms()[contig]))
        out.append([None if math.isnan(v) else float(f"{v:.4g}") for v in vals])
    return out


def _open_bigwigs(tracks: Sequence[ViewFile]) -> list[Any]:
    from hexamer.tracks.writers import import_pybigwig

    pybw = import_pybigwig()
    return [pybw.open(str(vf.path)) for vf in tracks]


def _check_tracks(tracks: Sequence[str | os.PathLike[str]]) -> list[ViewFile]:
    out = []
    for t in tracks:
        vf = classify(t)
        if vf.kind != "bigwig":
            raise ViewError(f"{vf.path}: a report embeds bigWig tracks only (hexamer track --format bigwig)")
        out.append(vf)
    return out


def _records(vf: Any, path: Path) -> Iterator[tuple[int, Any]]:
    """(1-based number, record) of each record; one htslib cannot read is a ``ViewError`` naming it."""
    records = iter(vf)
    n = 0
    while True:
        try:
            rec = next(records)
        except StopIteration:
            return
        except (OSError, ValueError) as exc:
            raise ViewError(f"{path}: record {n + 1} cannot be read ({exc})") from exc
        n += 1
        yield n, rec


def _read_rows(
    vcf: ViewFile, flank: int, reference: dict[str, int]
) -> tuple[list[str], list[list[Any]], list[Any]]:
    """(extra INFO columns, table rows, one ``(contig, start, end)`` window per row)."""
    import pysam

    try:
        vf = pysam.VariantFile(str(vcf.path))
    except (OSError, ValueError) as exc:
        raise ViewError(f"{vcf.path}: not a readable VCF ({exc})") from exc
    by_key = {contig_key(n): n for n in reference}
    # the input's own INFO fields (hexamer's other HEXAMER_* fields and htslib's END left out)
    extra = [k for k in vf.header.info if not k.startswith("HEXAMER_") and k != "END"][:12]
    rows: list[list[Any]] = []
    windows: list[tuple[str, int, int]] = []
    with vf:
        for n, rec in _records(vf, vcf.path):
            contig = by_key[contig_key(rec.chrom)]
            start = max(0, rec.pos - 1 - flank)
            end = min(reference[contig], rec.pos - 1 + len(rec.ref) + flank)
            for i, alt in enumerate(rec.alts or (".",)):
                info = dict(rec.info.items())
                own = [_cell(_allele_value(info.get(k), i)) for k in _OWN]
                more = [
                    _cell(_allele_value(info.get(k), i) if vf.header.info[k].number == "A" else info.get(k))
                    for k in extra
                ]
                rows.append([rec.chrom, rec.pos, rec.id or ".", rec.ref, alt, *own, *more, n])
                windows.append((contig, start, end))
    return extra, rows, windows


def build_report(
    vcf: str | os.PathLike[str],
    fasta: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    tracks: Sequence[str | os.PathLike[str]] = (),
    flank: int = 60,
    title: str | None = None,
) -> ReportResult:
    """Write the report of the scored ``vcf`` to ``out`` (atomically); every input is checked
    (``ViewError`` naming the file) before anything is read in bulk."""
    import pysam

    from hexamer.io.writers import AtomicTarget

    if not 0 <= flank <= MAX_FLANK:
        raise ViewError(f"--flank must be 0 to {MAX_FLANK:,} bases, got {flank}")
    variants, ref = classify(vcf, tabix=False), classify(fasta)
    if variants.kind != "vcf":
        raise ViewError(f"{variants.path}: not a VCF (.vcf, .vcf.gz)")
    if ref.kind != "fasta":
        raise ViewError(f"{ref.path}: not a FASTA file (.fa, .fasta, .fna, optionally .gz)")
    bigwigs = _check_tracks(tracks)
    reference = fasta_contigs(ref)
    check_contigs([variants, *bigwigs], reference, None)
    extra, rows, windows = _read_rows(variants, flank, reference)
    index: dict[tuple[str, int, int], int] = {}
    blocks: list[dict[str, Any]] = []
    readers = _open_bigwigs(bigwigs)
    try:
        with pysam.FastaFile(str(ref.path)) as fa:
            for contig, start, end in windows:
                if (contig, start, end) in index:
                    continue
                index[(contig, start, end)] = len(blocks)
                blocks.append(
                    {
                        "chr": contig,
                        "start": start,
                        "len": reference[contig],
                        "seq": fa.fetch(contig, start, end).upper(),
                        "values": _track_values(readers, contig, start, end),
                    }
                )
    finally:
        for bw in readers:
            bw.close()
    data = {
        "columns": [*_COLUMNS, *extra],
        "rows": [[*row[:-1], index[w]] for row, w in zip(rows, windows, strict=True)],
        "windows": blocks,
        "tracks": [vf.label for vf in bigwigs],
        "source": variants.name,
    }
    name = title or f"hexamer report: {variants.name}"
    igv_js = igv_js_path().read_text(encoding="utf-8")
    values = {
        "TITLE": html.escape(name),
        "PROBE": template("probe.js"),
        "IGV": igv_js.replace("</script", "<\\/script"),
        "DATA": script_json(data),
    }
    text = fill(template("report.html"), values)
    target = AtomicTarget(Path(out))
    with open(target.tmp, "w", encoding="utf-8") as f:
        f.write(text)
    target.commit()
    path = Path(out)
    return ReportResult(path, len({r[-1] for r in rows}), len(rows), path.stat().st_size, data["tracks"])
