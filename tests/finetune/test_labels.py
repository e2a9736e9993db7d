"""Label cells: class ordering, fixed classes, multilabel 0/1, metric filter clauses."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.finetune.inputs import DataError, RowTable
from hexamer.finetune.labels import AlignedRows, metric_mask, parse_labels


def _rows(**columns: list[object]) -> AlignedRows:
    n = len(next(iter(columns.values())))
    table = RowTable("t.tsv", tuple(columns), {k: list(v) for k, v in columns.items()})
    ids = [f"r{i}" for i in range(n)]
    return AlignedRows("t.tsv", ids, ["ACGT"] * n, list(range(1, n + 1)), table, list(range(1, n + 1)))


def test_integer_classes_sort_numerically_text_classes_as_text() -> None:
    task, y = parse_labels(_rows(c=["10", "2", "1", "2.0"]), "classification", ("c",), None)
    assert task.class_names == ("1", "2", "10") and y.tolist() == [2, 1, 0, 1]
    task, y = parse_labels(_rows(c=[True, False, True]), "classification", ("c",), None)
    assert task.kind == "binary" and task.class_names == ("0", "1") and y.tolist() == [1, 0, 1]
    task, y = parse_labels(_rows(c=["b", "a", "10"]), "classification", ("c",), None)
    assert task.class_names == ("10", "a", "b")


def test_fixed_classes_allow_one_class_in_a_test_set() -> None:
    task, y = parse_labels(_rows(c=["pos", "pos"]), "classification", ("c",), ("neg", "pos"))
    assert task.kind == "binary" and y.tolist() == [1, 1]


def test_multilabel_cells_and_one_class_column() -> None:
    task, y = parse_labels(
        _rows(a=["1", "0", "true"], b=["0", "yes", "no"]), "classification", ("a", "b"), None
    )
    assert task.kind == "multilabel" and y.tolist() == [[1, 0], [0, 1], [1, 0]]
    with pytest.raises(DataError, match=r"row 2 \(id 'r1'\): column 'a': a multilabel label must be 0 or 1"):
        parse_labels(_rows(a=["1", "2"], b=["0", "1"]), "classification", ("a", "b"), None)
    with pytest.raises(DataError, match=r"column 'b': one class only"):
        parse_labels(_rows(a=["1", "0"], b=["0", "0"]), "classification", ("a", "b"), None)


def test_metric_filter_clauses() -> None:
    r = _rows(se=["0.5", "1", "", "3"], q=[1, 2, 3, 4])
    assert metric_mask(r, ["se<=1", "q!=2"]).tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="expected COLUMN<=VALUE"):
        metric_mask(r, ["se ~ 1"])
    with pytest.raises(DataError, match="no metric filter column 'x'"):
        metric_mask(r, ["x<1"])
    assert metric_mask(r, []) is None
    assert isinstance(metric_mask(r, ["q>2"]), np.ndarray)
