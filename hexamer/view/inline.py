"""Tracks igv.js has no reader for, as features handed to it in the page: the variant scores of a
scored VCF (``HEXAMER_SCORE``) as a bar per variant, and an ISM table (CADD layout) as the
features of hexamer's heat-map track (``hexamer/data/view/tracks.js``).

A position with several ALT alleles keeps the one of largest ``|score|`` in the score track (the
VCF track beside it shows every allele). Rows past ``limit`` are not drawn, and the count of
those left out is returned so the page can say so.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.view.files import ViewError, ViewFile

__all__ = ["BASE_COLOURS", "InlineTrack", "IsmTable", "ism_table", "vcf_score_features"]

#: igv.js's own nucleotide colours
BASE_COLOURS = {"A": "rgb(0,150,0)", "C": "rgb(0,0,255)", "G": "rgb(209,113,5)", "T": "rgb(255,0,0)"}
SCORE_FIELD = "HEXAMER_SCORE"


@dataclass
class InlineTrack:
    """``features`` per series name (the page draws a one-series track as igv.js bars)."""

    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    left_out: int = 0

    @property
    def n_features(self) -> int:
        return sum(len(v) for v in self.series.values())


def _text_lines(path: Path) -> Iterator[str]:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt", errors="replace") as f:
        yield from f


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def vcf_score_features(vf: ViewFile, limit: int) -> InlineTrack | None:
    """The ``HEXAMER_SCORE`` of each record as a one-base bar; ``None`` when the VCF has none."""
    best: dict[tuple[str, int], float] = {}
    left_out = 0
    for line in _text_lines(vf.path):
        if line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) < 8 or not cols[1].isdigit():
            raise ViewError(f"{vf.path}: not a VCF record (8 columns, a numeric POS): {line[:60]!r}")
        info = dict(item.partition("=")[::2] for item in cols[7].split(";"))
        if SCORE_FIELD not in info:
            continue
        scores = [s for s in (_number(x) for x in info[SCORE_FIELD].split(",")) if s is not None]
        if not scores:
            continue
        if len(best) >= limit:
            left_out += 1
            continue
        key = (cols[0], int(cols[1]) - 1)
        top = max(scores, key=abs)
        if key not in best or abs(top) > abs(best[key]):
            best[key] = top
    if not best:
        return None
    features = [{"chr": c, "start": s, "end": s + 1, "value": v} for (c, s), v in best.items()]
    return InlineTrack({"score": features}, left_out)


@dataclass
class IsmTable:
    """An ISM table as the page's heat-map track reads it: one feature per position (its reference
    base and the ``RawScore`` per alternative base), and ``span``, the largest ``|score|`` (the
    colour scale runs from ``-span`` to ``+span``, centred on 0)."""

    positions: list[dict[str, Any]] = field(default_factory=list)
    n_scores: int = 0
    left_out: int = 0
    span: float = 0.0


def ism_table(vf: ViewFile, limit: int) -> IsmTable:
    """The scored SNVs of a CADD-layout ISM table, per position, in the table's order."""
    out = IsmTable()
    by_pos: dict[tuple[str, int], dict[str, Any]] = {}
    for line in _text_lines(vf.path):
        if line.startswith("#"):
            continue
        cols = line.rstrip("\n").split("\t")
        if len(cols) < 5 or not cols[1].isdigit():
            raise ViewError(
                f"{vf.path}: not a CADD-layout row (#Chrom Pos Ref Alt RawScore ...): {line[:60]!r}"
            )
        ref, alt, score = cols[2].upper(), cols[3].upper(), _number(cols[4])
        if alt not in BASE_COLOURS or len(ref) != 1 or score is None:
            continue  # an indel or an empty score: the table's own rows say why
        if out.n_scores >= limit:
            out.left_out += 1
            continue
        start = int(cols[1]) - 1
        key = (cols[0], start)
        if key not in by_pos:
            by_pos[key] = {"chr": cols[0], "start": start, "end": start + 1, "ref": ref, "scores": {}}
            out.positions.append(by_pos[key])
        by_pos[key]["scores"][alt] = score
        out.n_scores += 1
        out.span = max(out.span, abs(score))
    return out
