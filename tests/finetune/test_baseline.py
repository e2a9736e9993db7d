"""k-mer baseline: counts against a plain Python count; high Pearson / AUROC on a planted-motif
task built on real human DNA; k chosen on validation."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pytest

from hexamer.finetune.baseline import kmer_counts, run_baseline
from hexamer.finetune.splits import split_random
from hexamer.finetune.task import LabelledSet, TaskSpec
from tests.finetune.motif_data import motif_task


def test_kmer_counts_equal_a_plain_count_and_skip_n() -> None:
    seqs = ["ACGTACGTTA", "NNACGNAC", "", "acgt"]
    got = kmer_counts(seqs, 2).toarray()
    names = ["".join(p) for p in product("ACGT", repeat=2)]
    for i, s in enumerate(seqs):
        s = s.upper()
        want = Counter(s[j : j + 2] for j in range(len(s) - 1) if "N" not in s[j : j + 2])
        assert got[i].tolist() == [want.get(n, 0) for n in names]
    assert kmer_counts(["ACG"], 6).nnz == 0


@pytest.fixture(scope="module")
def motif() -> tuple[list[str], np.ndarray, np.ndarray]:
    return motif_task(600, seed=1)


def _sets(task: TaskSpec, seqs: list[str], labels: np.ndarray) -> tuple[LabelledSet, ...]:
    data = LabelledSet(tuple(f"r{i}" for i in range(len(seqs))), tuple(seqs), labels)
    strat = labels if task.kind != "regression" else None
    return split_random(len(seqs), valid_fraction=0.15, test_fraction=0.2, seed=0, stratify=strat).sets(data)


def test_ridge_baseline_finds_the_planted_motif(motif) -> None:
    seqs, activity, _ = motif
    task = TaskSpec("regression", ("activity",))
    train, valid, test = _sets(task, seqs, activity[:, None].astype(np.float32))
    res = run_baseline(task, train, valid, test, ks=(2, 4, 6))
    assert res.metrics["test"]["pearson"] > 0.8, res.selection
    assert res.k >= 4  # a 7-bp site needs long k-mers; k=2 cannot see it
    assert len(res.selection) == 3 * 4 and res.outputs["test"].shape == (len(test), 1)
    # outputs are on the raw label scale
    assert abs(res.outputs["test"].mean() - test.labels.mean()) < 0.5
    assert res.to_json()["selected_by"] == "validation pearson"


def test_logistic_baseline_classifies_the_motif_and_works_without_valid(motif) -> None:
    seqs, _, has = motif
    task = TaskSpec("binary", ("has_motif",), ("0", "1"))
    train, _, test = _sets(task, seqs, has)
    res = run_baseline(task, train, None, test, ks=(6,))
    assert res.metrics["test"]["auroc"] > 0.75  # chance: 0.5
    assert "valid" not in res.metrics and "seeded 10%" in res.notes[0]
    assert res.outputs["test"].shape == (len(test), 2)
