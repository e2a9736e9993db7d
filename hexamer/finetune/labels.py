"""Label cells -> arrays, for :mod:`hexamer.finetune.data`: numbers, classes, multilabel 0/1,
weights and the metric filter, each bad cell a :class:`DataError` naming file, row, id and column.

Class labels: the distinct values of the label column, sorted — numerically when every value is an
integer (``0``/``1`` stay 0/1), else as text (``"enhancer" < "promoter"``) — are the class names; a
row's class index is its value's position. Validation and test tables reuse the training classes.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hexamer.finetune.inputs import DataError, RowTable
from hexamer.finetune.task import TaskSpec

__all__ = ["AlignedRows", "metric_mask", "number_cell", "parse_labels", "row_weights"]

_FILTER = re.compile(r"^\s*([^<>=!]+?)\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")
_OPS = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_TRUE = {"1", "1.0", "true", "yes"}
_FALSE = {"0", "0.0", "false", "no"}


@dataclass
class AlignedRows:
    """Sequence records and their label-table rows, in the same order. Records aligned with the label table's rows; ``label_rows`` are 1-based rows of ``table``."""

    seq_source: str
    ids: list[str]
    seqs: list[str]
    seq_rows: list[int]
    table: RowTable
    label_rows: list[int]
    chroms: list[str] | None = None


# --------------------------------------------------------------------------- cells


def number_cell(value: Any, src: str, row: int, rid: str, col: str, what: str = "label") -> float:
    if value is None or (isinstance(value, str) and not value.strip()):
        raise DataError(src, f"missing {what}", row=row, id=rid, column=col)
    try:
        x = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise DataError(src, f"{what} {value!r} is not a number", row=row, id=rid, column=col) from None
    if math.isnan(x):
        raise DataError(src, f"{what} is NaN", row=row, id=rid, column=col)
    if math.isinf(x):
        raise DataError(src, f"{what} is infinite", row=row, id=rid, column=col)
    return x


def _class_key(value: Any) -> tuple[str, float | None]:
    """``(name, numeric value or None)`` of a class label cell."""
    if isinstance(value, bool):
        return str(int(value)), float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if math.isfinite(value) and float(value).is_integer():
            return str(int(value)), float(value)
        return repr(value), None
    text = str(value).strip()
    try:
        x = float(text)
    except ValueError:
        return text, None
    return (str(int(x)), x) if math.isfinite(x) and x.is_integer() else (text, None)


# --------------------------------------------------------------------------- labels


def _regression_labels(r: AlignedRows, cols: Sequence[str]) -> np.ndarray:
    src = r.table.source
    out = np.empty((len(r.ids), len(cols)), dtype=np.float32)
    for j, col in enumerate(cols):
        values = r.table.column(col, "label column")
        for i, v in enumerate(values):
            out[i, j] = number_cell(v, src, r.label_rows[i], r.ids[i], col)
    return out


def _class_labels(
    r: AlignedRows, col: str, fixed: tuple[str, ...] | None
) -> tuple[np.ndarray, tuple[str, ...]]:
    src = r.table.source
    keys: list[tuple[str, float | None]] = []
    for i, v in enumerate(r.table.column(col, "label column")):
        if v is None or (isinstance(v, str) and not v.strip()) or (isinstance(v, float) and math.isnan(v)):
            raise DataError(src, "missing class label", row=r.label_rows[i], id=r.ids[i], column=col)
        keys.append(_class_key(v))
    if fixed is None:
        distinct = dict(keys)
        if len(distinct) < 2:
            only = next(iter(distinct), "")
            raise DataError(src, f"one class only ({only!r}): a classifier needs at least two", column=col)
        numeric = all(x is not None for x in distinct.values())
        names = tuple(sorted(distinct, key=lambda k: distinct[k]) if numeric else sorted(distinct))
    else:
        names = fixed
    index = {name: i for i, name in enumerate(names)}
    out = np.empty(len(keys), dtype=np.int64)
    for i, (name, _) in enumerate(keys):
        if name not in index:
            raise DataError(
                src,
                f"class {name!r} is not among the training classes {', '.join(map(repr, names))}",
                row=r.label_rows[i],
                id=r.ids[i],
                column=col,
            )
        out[i] = index[name]
    return out, names


def _multilabel(r: AlignedRows, cols: Sequence[str], train: bool) -> np.ndarray:
    src = r.table.source
    out = np.empty((len(r.ids), len(cols)), dtype=np.float32)
    for j, col in enumerate(cols):
        for i, v in enumerate(r.table.column(col, "label column")):
            text = str(v).strip().lower() if v is not None else ""
            if text not in _TRUE and text not in _FALSE:
                reason = f"a multilabel label must be 0 or 1, got {v!r}"
                raise DataError(src, reason, row=r.label_rows[i], id=r.ids[i], column=col)
            out[i, j] = 1.0 if text in _TRUE else 0.0
        if train and len(out) and out[:, j].min() == out[:, j].max():
            raise DataError(src, f"one class only (every row is {int(out[0, j])})", column=col)
    return out


def parse_labels(
    r: AlignedRows, task: str, cols: tuple[str, ...], class_names: tuple[str, ...] | None
) -> tuple[TaskSpec, np.ndarray]:
    """The task (its kind decided from the data, see the module text) and the label array."""
    if task == "regression":
        return TaskSpec("regression", cols), _regression_labels(r, cols)
    if len(cols) > 1:
        return TaskSpec("multilabel", cols), _multilabel(r, cols, class_names is None)
    y, names = _class_labels(r, cols[0], class_names)
    kind = "binary" if len(names) == 2 else "multiclass"
    return TaskSpec(kind, cols, names), y


# --------------------------------------------------------------------------- other columns


def metric_mask(r: AlignedRows, clauses: Sequence[str]) -> np.ndarray | None:
    if not clauses:
        return None
    keep = np.ones(len(r.ids), dtype=bool)
    for clause in clauses:
        m = _FILTER.match(clause)
        if m is None:
            raise ValueError(f"metric filter {clause!r}: expected COLUMN<=VALUE (or <, >=, >, ==, !=)")
        col, op, raw = m.groups()
        try:
            limit = float(raw)
        except ValueError:
            raise ValueError(f"metric filter {clause!r}: {raw!r} is not a number") from None
        values = r.table.column(col, "metric filter column")
        for i, v in enumerate(values):
            try:
                x = float(v) if v is not None and str(v).strip() else math.nan
            except (TypeError, ValueError):
                reason = f"metric filter value {v!r} is not a number"
                raise DataError(
                    r.table.source, reason, row=r.label_rows[i], id=r.ids[i], column=col
                ) from None
            keep[i] &= bool(_OPS[op](x, limit))  # NaN compares false: the row does not count
    return keep


def row_weights(r: AlignedRows, col: str | None) -> np.ndarray | None:
    if col is None:
        return None
    out = np.empty(len(r.ids), dtype=np.float32)
    for i, v in enumerate(r.table.column(col, "weight column")):
        w = number_cell(v, r.table.source, r.label_rows[i], r.ids[i], col, what="weight")
        if w < 0:
            raise DataError(
                r.table.source, f"weight {w} is negative", row=r.label_rows[i], id=r.ids[i], column=col
            )
        out[i] = w
    return out
