"""The published-numbers table: every task's reference is built from it and leads with its headline."""

from __future__ import annotations

import pytest

from hexamer.evals.published import BP_LEVEL, HEADLINE, REFERENCE_MODELS, published_reference
from hexamer.evals.registry import TASK_NAMES, get_task


def test_every_task_has_its_headline_in_the_table() -> None:
    assert set(HEADLINE) == set(TASK_NAMES) and set(BP_LEVEL) <= set(TASK_NAMES)
    for name in TASK_NAMES:
        task = get_task(name)
        metric, values = HEADLINE[name]
        assert metric == task.headline
        for model, value in zip(REFERENCE_MODELS, values, strict=True):
            assert task.reference.get(model, {}).get(metric) == value


def test_order_of_the_published_numbers() -> None:
    ref = published_reference("niah")
    assert list(ref)[:3] == ["Carbon-3B", "Carbon-8B", "Evo2-7B"]  # GENERator has no NIAH number
    assert list(ref["Carbon-3B"])[:2] == ["gen_exact_match", "niah_16k.gen_exact_match"]
    assert ref["Carbon-3B native"]["niah_8k.gen_exact_match"] == pytest.approx(0.81)
    brca2 = published_reference("brca2")
    assert list(brca2)[-3:] == ["Carbon-3B bp-level", "Carbon-8B bp-level", "Carbon-3B repo run"]
    assert brca2["Carbon-8B bp-level"] == {"auroc": pytest.approx(0.858)}
    assert published_reference("codon")["Carbon repo run, older 5,000-pair set"] == {"accuracy": 0.8376}
