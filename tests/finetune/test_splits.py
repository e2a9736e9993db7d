"""Splits: chromosome, column, random and k-fold; every row in exactly one set; clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.finetune.splits import (
    SplitError,
    chrom_key,
    fold_summary,
    kfold_splits,
    split_by_chromosome,
    split_by_column,
    split_random,
)
from hexamer.finetune.task import LabelledSet


def _partition(split, n: int) -> None:
    allrows = np.concatenate([split.train, split.valid, split.test])
    assert sorted(allrows.tolist()) == list(range(n))


def test_chromosome_split_default_sets_accepts_chr_prefix_either_way() -> None:
    chroms = ["chr1", "chr7", "chr13", "chr19", "chrX", "chr21", "chr2", "7"]
    s = split_by_chromosome(chroms)
    assert s.valid.tolist() == [3, 4, 5] and s.test.tolist() == [1, 2, 7] and s.train.tolist() == [0, 6]
    _partition(s, len(chroms))
    s2 = split_by_chromosome(["1", "2", "3"], valid_chroms=["chr2"], test_chroms=["CHR3"])
    assert s2.valid.tolist() == [1] and s2.test.tolist() == [2]
    assert chrom_key("ChrX") == "X" and chrom_key("MT") == "MT"


def test_chromosome_split_matching_nothing_names_the_chromosomes_present() -> None:
    chroms = ["chr1", "chr2", "chr2", "chr19"]
    with pytest.raises(SplitError) as err:
        split_by_chromosome(chroms, test_chroms=("7", "13"))
    msg = str(err.value)
    assert "--test-chroms 7,13" in msg and "chr1 (1)" in msg and "chr2 (2)" in msg
    # one of several absent: a note, not an error
    s = split_by_chromosome(chroms, valid_chroms=("19", "21"), test_chroms=("2",))
    assert any("21" in note for note in s.notes)


def test_chromosome_split_errors() -> None:
    with pytest.raises(SplitError, match="both"):
        split_by_chromosome(["1", "7"], valid_chroms=("7",), test_chroms=("chr7",))
    with pytest.raises(SplitError, match="training set is empty"):
        split_by_chromosome(["7", "19"], valid_chroms=("19",), test_chroms=("7",))
    with pytest.raises(SplitError, match="chromosome column"):
        split_by_chromosome(None)


def test_column_split_synonyms_and_unknown_value_names_row() -> None:
    s = split_by_column(["train", "Validation", "TEST", "dev", "training"])
    assert s.train.tolist() == [0, 4] and s.valid.tolist() == [1, 3] and s.test.tolist() == [2]
    with pytest.raises(SplitError, match=r"data.tsv: row 3: column 'fold': 'holdout'"):
        split_by_column(["train", "test", "holdout"], column="fold", source="data.tsv")


def test_random_split_seeded_and_stratified() -> None:
    a = split_random(1000, valid_fraction=0.1, test_fraction=0.2, seed=3)
    b = split_random(1000, valid_fraction=0.1, test_fraction=0.2, seed=3)
    assert np.array_equal(a.test, b.test) and a.valid.size == 100 and a.test.size == 200
    _partition(a, 1000)
    c = split_random(1000, seed=4)
    assert not np.array_equal(a.test, c.test)
    y = np.r_[np.zeros(900), np.ones(100)]
    s = split_random(1000, seed=0, stratify=y)
    assert y[s.test].sum() == 10 and y[s.valid].sum() == 10
    with pytest.raises(ValueError, match="< 1"):
        split_random(10, valid_fraction=0.5, test_fraction=0.5)


def test_kfold_ten_folds_stratified_fixed_test() -> None:
    y = np.r_[np.zeros(170), np.ones(30)]
    test = np.arange(180, 200)
    splits = kfold_splits(200, folds=10, seed=1, stratify=y, test=test)
    assert len(splits) == 10
    held = np.concatenate([s.valid for s in splits])
    assert sorted(held.tolist()) == list(range(180))  # each non-test row held out exactly once
    for s in splits:
        _partition(s, 200)
        assert np.array_equal(s.test, test)
        assert y[s.valid].sum() in (1, 2)  # 10 positives outside the test set... dealt round the folds
    again = kfold_splits(200, folds=10, seed=1, stratify=y, test=test)
    assert all(np.array_equal(a.valid, b.valid) for a, b in zip(splits, again, strict=True))
    cv = kfold_splits(50, folds=5, holdout="test")
    assert all(s.valid.size == 0 and s.test.size == 10 for s in cv)


def test_fold_summary_mean_two_sd() -> None:
    out = fold_summary([0.5, 0.6, 0.7, None])
    assert out["defined"] == 3 and out["mean"] == pytest.approx(0.6)
    assert out["sd"] == pytest.approx(0.1) and out["low"] == pytest.approx(0.4)


def test_split_sets_and_labels_on_a_labelled_set() -> None:
    data = LabelledSet(
        ids=("a", "b", "c"),
        sequences=("ACGT", "AAAA", "CCCC"),
        labels=np.zeros((3, 1), np.float32),
        chroms=("1", "7", "19"),
    )
    s = split_by_chromosome(data.chroms)
    train, valid, test = s.sets(data)
    assert train.ids == ("a",) and valid.ids == ("c",) and test.ids == ("b",)
    assert s.labels(3) == ["train", "test", "valid"]
