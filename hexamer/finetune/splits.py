"""Train / validation / test splits of one labelled table, as row indices.

* :func:`split_by_chromosome`: held-out chromosomes (the Malinois recipe validates on 19, 21 and X
  and tests on 7 and 13). Names are compared without a leading ``chr`` (any case), so ``chr7`` in
  the data matches ``7`` on the command line and the other way round; ``M``/``MT`` are not aliased.
* :func:`split_by_column`: a column of ``train`` / ``valid`` / ``test`` values (``training``,
  ``validation``, ``val`` and ``dev`` are accepted too, any case); any other value is an error that
  names its row, so no row silently leaves every split.
* :func:`split_random`: seeded fractions, stratified by class for classification.
* :func:`kfold_splits`: k folds (10 by default, the Nucleotide Transformer benchmark protocol:
  each fold in turn is the validation set, the test set is fixed, and the test metric is reported as
  mean ± 2 s.d. over folds — :func:`fold_summary`), stratified by class for classification.

A split that matches nothing (``--test-chroms 7,13`` with no row on 7 or 13) or leaves the training
set empty raises :class:`SplitError` naming what the data holds. Every row lands in exactly one set.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hexamer.finetune.task import LabelledSet

__all__ = [
    "DEFAULT_TEST_CHROMS",
    "DEFAULT_VALID_CHROMS",
    "Split",
    "SplitError",
    "chrom_key",
    "fold_summary",
    "kfold_splits",
    "split_by_chromosome",
    "split_by_column",
    "split_random",
]

DEFAULT_VALID_CHROMS: tuple[str, ...] = ("19", "21", "X")
DEFAULT_TEST_CHROMS: tuple[str, ...] = ("7", "13")
_CHR_PREFIX = re.compile(r"^chr", re.IGNORECASE)
_SPLIT_VALUES = {
    "train": "train",
    "training": "train",
    "valid": "valid",
    "validation": "valid",
    "val": "valid",
    "dev": "valid",
    "test": "test",
}


class SplitError(ValueError):
    """A split that cannot be made from this data (matches nothing, empty training set, ...)."""


@dataclass(frozen=True)
class Split:
    """Row indices of each set (sorted), what made them, and notes for the report."""

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    method: str
    notes: tuple[str, ...] = field(default=())

    def sets(self, data: LabelledSet) -> tuple[LabelledSet, LabelledSet, LabelledSet]:
        """``(train, valid, test)`` rows of ``data``."""
        return data.subset(self.train), data.subset(self.valid), data.subset(self.test)

    def labels(self, n: int) -> list[str]:
        """The set name of each of ``n`` rows (``train``/``valid``/``test``), for prediction tables."""
        out = [""] * n
        for name in ("train", "valid", "test"):
            for i in getattr(self, name):
                out[i] = name
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "train": int(self.train.size),
            "valid": int(self.valid.size),
            "test": int(self.test.size),
            "notes": list(self.notes),
        }


def _split(method: str, n: int, train: Any, valid: Any, test: Any, notes: Sequence[str] = ()) -> Split:
    parts = [np.sort(np.asarray(p, dtype=np.int64)) for p in (train, valid, test)]
    if parts[0].size == 0:
        raise SplitError(
            f"{method}: the training set is empty ({parts[1].size} validation and {parts[2].size} test "
            f"rows of {n})"
        )
    assert sum(p.size for p in parts) == n, "every row lands in exactly one set"
    return Split(parts[0], parts[1], parts[2], method, tuple(notes))


def chrom_key(name: str) -> str:
    """A chromosome name without a leading ``chr`` (any case): ``chr7`` and ``7`` compare equal."""
    return _CHR_PREFIX.sub("", str(name).strip())


def _present(chroms: Sequence[str]) -> str:
    counts = Counter(chroms)

    def order(c: str) -> tuple[int, int | str]:
        k = chrom_key(c)
        return (0, int(k)) if k.isdigit() else (1, k)

    shown = [f"{c} ({counts[c]})" for c in sorted(counts, key=order)[:40]]
    more = f", ... {len(counts) - 40} more" if len(counts) > 40 else ""
    return ", ".join(shown) + more


def split_by_chromosome(
    chroms: Sequence[str] | None,
    *,
    valid_chroms: Sequence[str] = DEFAULT_VALID_CHROMS,
    test_chroms: Sequence[str] = DEFAULT_TEST_CHROMS,
) -> Split:
    """Rows on ``valid_chroms`` are the validation set, rows on ``test_chroms`` the test set, the
    rest train. A chromosome list that matches no row is an error naming the chromosomes present
    (with their row counts); one name of several that is absent becomes a note."""
    if chroms is None:
        raise SplitError("a chromosome split needs a chromosome column (none was read)")
    valid_keys = {chrom_key(c) for c in valid_chroms}
    test_keys = {chrom_key(c) for c in test_chroms}
    both = sorted(valid_keys & test_keys)
    if both:
        raise SplitError(f"chromosome(s) {', '.join(both)} named both for validation and for test")
    keys = np.array([chrom_key(c) for c in chroms], dtype=object)
    present = set(keys.tolist())
    notes: list[str] = []
    for what, wanted in (("valid", valid_chroms), ("test", test_chroms)):
        hit = [c for c in wanted if chrom_key(c) in present]
        if wanted and not hit:
            raise SplitError(
                f"--{what}-chroms {','.join(wanted)} matches no row; chromosomes in the data: "
                f"{_present(list(chroms))}"
            )
        missed = [c for c in wanted if chrom_key(c) not in present]
        if missed:
            notes.append(f"{what} chromosome(s) {', '.join(missed)} absent from the data")
    in_valid = np.isin(keys, list(valid_keys))
    in_test = np.isin(keys, list(test_keys))
    method = f"chromosomes (valid {','.join(valid_chroms)}; test {','.join(test_chroms)})"
    train = np.flatnonzero(~in_valid & ~in_test)
    return _split(method, len(keys), train, np.flatnonzero(in_valid), np.flatnonzero(in_test), notes)


def split_by_column(values: Sequence[Any], *, column: str = "split", source: str = "input") -> Split:
    """Sets named per row by a column (train/valid/test; see the module text for synonyms).

    An empty or unknown value raises :class:`SplitError` naming ``source``, the 1-based data row
    and ``column``."""
    sets: dict[str, list[int]] = {"train": [], "valid": [], "test": []}
    for i, value in enumerate(values):
        name = _SPLIT_VALUES.get(str("" if value is None else value).strip().lower())
        if name is None:
            raise SplitError(
                f"{source}: row {i + 1}: column {column!r}: {value!r} is not a split name "
                f"(expected train, valid or test; also training, validation, val, dev)"
            )
        sets[name].append(i)
    return _split(f"column {column!r}", len(values), sets["train"], sets["valid"], sets["test"])


def _check_fraction(name: str, value: float) -> None:
    if not (0.0 <= value < 1.0):
        raise ValueError(f"{name} must be in [0, 1), got {value}")


def _groups(n: int, strata: Sequence[Any] | np.ndarray | None) -> list[np.ndarray]:
    if strata is None:
        return [np.arange(n)]
    s = np.asarray(strata)
    if s.ndim != 1 or s.shape[0] != n:
        raise ValueError(f"stratify: expected {n} class labels, got shape {s.shape}")
    return [np.flatnonzero(s == v) for v in np.unique(s)]


def split_random(
    n: int,
    *,
    valid_fraction: float = 0.1,
    test_fraction: float = 0.1,
    seed: int = 0,
    stratify: Sequence[Any] | np.ndarray | None = None,
) -> Split:
    """Seeded random fractions; with ``stratify`` (class labels) each class is split in the same
    proportions. Sizes are rounded per class, so the same seed and data give the same rows."""
    _check_fraction("valid_fraction", valid_fraction)
    _check_fraction("test_fraction", test_fraction)
    if valid_fraction + test_fraction >= 1.0:
        raise ValueError(f"valid_fraction + test_fraction must be < 1, got {valid_fraction + test_fraction}")
    rng = np.random.default_rng(seed)
    train: list[np.ndarray] = []
    valid: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for group in _groups(n, stratify):
        perm = rng.permutation(group)
        n_test = round(len(perm) * test_fraction)
        n_valid = round(len(perm) * valid_fraction)
        test.append(perm[:n_test])
        valid.append(perm[n_test : n_test + n_valid])
        train.append(perm[n_test + n_valid :])
    method = f"random (valid {valid_fraction}, test {test_fraction}, seed {seed}"
    method += ", stratified)" if stratify is not None else ")"
    return _split(method, n, np.concatenate(train), np.concatenate(valid), np.concatenate(test))


def kfold_splits(
    n: int,
    *,
    folds: int = 10,
    seed: int = 0,
    stratify: Sequence[Any] | np.ndarray | None = None,
    test: np.ndarray | Sequence[int] | None = None,
    holdout: Literal["valid", "test"] = "valid",
) -> list[Split]:
    """``folds`` splits: fold ``k`` is held out (as the validation set, or as the test set with
    ``holdout="test"``), the other folds train. Rows in ``test`` (a fixed test set, NT protocol)
    are in no fold and are every split's test set. Stratified folds deal each class's shuffled rows
    round the folds in turn, so fold sizes differ by at most one per class."""
    if not (2 <= folds <= 1000):
        raise ValueError(f"folds must be in 2..1000, got {folds}")
    if holdout not in ("valid", "test"):
        raise ValueError(f"holdout must be 'valid' or 'test', got {holdout!r}")
    fixed = np.unique(np.asarray([] if test is None else test, dtype=np.int64))
    if fixed.size and (fixed.min() < 0 or fixed.max() >= n):
        raise ValueError(f"test rows must be in 0..{n - 1}")
    if holdout == "test" and fixed.size:
        raise ValueError("holdout='test' makes each fold the test set; a fixed test set cannot be given too")
    pool = np.setdiff1d(np.arange(n), fixed)
    if pool.size < folds:
        raise SplitError(f"{folds} folds need at least {folds} rows outside the test set, got {pool.size}")
    strata = None if stratify is None else np.asarray(stratify)[pool]
    rng = np.random.default_rng(seed)
    fold_of = np.empty(pool.size, dtype=np.int64)
    offset = 0
    for group in _groups(pool.size, strata):
        perm = rng.permutation(group)
        fold_of[perm] = (offset + np.arange(perm.size)) % folds
        offset += perm.size
    out = []
    for k in range(folds):
        held, rest = pool[fold_of == k], pool[fold_of != k]
        method = f"fold {k + 1} of {folds} (seed {seed}{', stratified' if stratify is not None else ''})"
        if holdout == "valid":
            out.append(_split(method, n, rest, held, fixed))
        else:
            out.append(_split(method, n, rest, np.empty(0, np.int64), held))
    return out


def fold_summary(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean and sample s.d. over folds, and mean ± 2 s.d. (the NT benchmark's report); folds whose
    metric is undefined (``None``) are counted and left out."""
    defined = [float(v) for v in values if v is not None]
    out: dict[str, Any] = {"folds": len(values), "defined": len(defined), "values": list(values)}
    if not defined:
        return {**out, "mean": None, "sd": None, "low": None, "high": None}
    mean = float(np.mean(defined))
    sd = float(np.std(defined, ddof=1)) if len(defined) > 1 else None
    low = None if sd is None else mean - 2 * sd
    high = None if sd is None else mean + 2 * sd
    return {**out, "mean": mean, "sd": sd, "low": low, "high": high}
