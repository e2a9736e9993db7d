"""Result rows of the VEP pipeline: their Arrow schema and their order.

Outputs are in input order, ``(record, alt_index)``; a stream that claims to be in that order is
checked as it is read, so a wrong claim fails instead of writing a shuffled file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hexamer.io.vcf.records import Variant
from hexamer.model.finite import non_finite_output
from hexamer.vep.settings import ROW_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Key", "Row", "in_order", "ordered_rows", "result_row", "row_key", "row_schema"]

#: one output row: the columns :data:`~hexamer.vep.settings.ROW_COLUMNS` (plus a head's extras)
Row = dict[str, Any]
#: a row's place in the input: ``(record, alt_index)``
Key = tuple[int, int]


def result_row(
    v: Variant,
    recipe: str,
    status: str,
    score: float | None = None,
    reason: str | None = None,
    *,
    n_scored_bp: int | None = None,
    n_oov_bp: int | None = None,
) -> Row:
    """One output row; an ``ok`` score that is not a finite number (the model's output was NaN or
    infinite) makes the row ``failed`` with the reason, so no row is ``ok`` without a number."""
    if status == "ok" and (score is None or not math.isfinite(score)):
        status, score, reason = "failed", None, non_finite_output("score")
    return {
        "record": v.record,
        "alt_index": v.alt_index,
        "id": v.id,
        "chrom": v.chrom,
        "pos": v.pos,
        "ref": v.ref,
        "alt": v.alt,
        "kind": v.kind,
        "recipe": recipe,
        "score": score,
        "status": status,
        "reason": reason,
        "n_scored_bp": n_scored_bp,
        "n_oov_bp": n_oov_bp,
    }


def row_schema(extra: Iterable[str] = ()) -> pa.Schema:
    """Arrow schema of a result row (fixed, so every chunk and output agree on types); ``extra``
    names float64 columns after :data:`ROW_COLUMNS` (a fine-tuned head's effect per output)."""
    import pyarrow as pa

    types = {"record": pa.int64(), "alt_index": pa.int64(), "pos": pa.int64(), "score": pa.float64()}
    types.update(n_scored_bp=pa.int64(), n_oov_bp=pa.int64())
    fields = [(name, types.get(name, pa.string())) for name in ROW_COLUMNS]
    extra = list(extra)
    clash = sorted(set(extra) & set(ROW_COLUMNS)) or sorted({c for c in extra if extra.count(c) > 1})
    if clash:
        raise ValueError(f"extra column(s) {', '.join(clash)} repeat a column of the result rows")
    return pa.schema([*fields, *((name, pa.float64()) for name in extra)])


def row_key(row: Mapping[str, Any]) -> tuple[int, int]:
    return row["record"], row["alt_index"]


def in_order(rows: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """``rows`` as they come, checked to be sorted by ``(record, alt_index)`` (ties allowed)."""
    last: tuple[int, int] | None = None
    for row in rows:
        key = row_key(row)
        if last is not None and key < last:
            raise ValueError(
                f"presorted rows are not sorted by (record, alt_index): {key} comes after {last}"
            )
        last = key
        yield row


def ordered_rows(rows: Iterable[Mapping[str, Any]], presorted: bool) -> Iterator[Mapping[str, Any]]:
    """Rows in ``(record, alt_index)`` order: streamed when ``presorted``, else sorted in memory
    (a stable sort, so of rows with the same key the last one given comes last)."""
    return in_order(rows) if presorted else iter(sorted(rows, key=row_key))
