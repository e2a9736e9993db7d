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


def test_order_and_merge_of_extra_numbers() -> None:
    ref = published_reference("niah", {"Carbon-3B": {"niah_8k.gen_exact_match": 0.5}, "x": {"a": 1.0}})
    assert list(ref) == ["Carbon-3B", "Carbon-8B", "Evo2-7B", "x"]  # GENERator has no NIAH number
    assert ref["Carbon-3B"] == {"gen_exact_match": 0.79, "niah_8k.gen_exact_match": 0.5}
    brca2 = published_reference("brca2")
    assert list(brca2)[-2:] == ["Carbon-3B bp-level", "Carbon-8B bp-level"]
    assert brca2["Carbon-8B bp-level"] == {"auroc": pytest.approx(0.858)}
