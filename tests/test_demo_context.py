"""The context measures of the demo and the model card (hexamer.demo.context), checked on a tiny
random model: what they compute, not a model's quality."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hexamer import Carbon
from hexamer.demo.context import (
    FAR_HUMAN_REGION,
    copy_score,
    distinct_kmers,
    far_human_file,
    far_human_windows,
    planted_value_retrieval,
    real_vs_shuffled,
)
from hexamer.demo.markov import acgt_codes
from hexamer.demo.shuffle import dinucleotide_shuffle


@pytest.fixture(scope="module")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)


def test_far_human_region_is_shipped_and_clean() -> None:
    windows = far_human_windows()
    assert FAR_HUMAN_REGION.startswith("chrX:20,000,001-20,048,000")
    assert [len(w) for w in windows] == [6000] * 8
    assert set("".join(windows)) == set("ACGT")
    assert far_human_windows(max_windows=2) == windows[:2]
    assert far_human_file().stat().st_size < 64 * 1024


def test_copy_score_is_the_mean_log_probability_of_each_copy(carbon: Carbon) -> None:
    res = copy_score(carbon, unit_bp=60, seed=3)
    unit = "".join(np.random.default_rng(3).choice(list("ACGT"), 60))
    lp = carbon.base_logprobs(unit + unit, method="exact")
    true = lp[np.arange(120), acgt_codes(unit + unit)]
    assert res["copy1_logp"] == pytest.approx(float(true[:60].mean()), abs=1e-6)
    assert res["copy2_logp"] == pytest.approx(float(true[60:].mean()), abs=1e-6)
    assert 0 <= res["copy2_accuracy"] <= 1


def test_real_vs_shuffled_scores_the_dinucleotide_shuffle(carbon: Carbon) -> None:
    windows = [w[:600] for w in far_human_windows(max_windows=2)]
    res = real_vs_shuffled(carbon, windows, seed=4)
    shuffled = "".join(dinucleotide_shuffle(w, 4 + i) for i, w in enumerate(windows))
    lp = carbon.base_logprobs(shuffled[:600], method="fns")
    first = float(lp[np.arange(600), acgt_codes(shuffled[:600])].mean())
    lp2 = carbon.base_logprobs(shuffled[600:], method="fns")
    second = float(lp2[np.arange(600), acgt_codes(shuffled[600:])].mean())
    assert res["shuffled_fns"] == pytest.approx((first + second) / 2, abs=1e-6)
    assert res["gap_exact"] == pytest.approx(res["real_exact"] - res["shuffled_exact"], abs=1e-9)
    assert res["n_bases"] == 1200


def test_planted_value_retrieval_runs_at_the_native_context(carbon: Carbon) -> None:
    res = planted_value_retrieval(carbon, far_human_file(), n=3, ctx_tokens=64)
    assert res["ctx_tokens"] == 64 and res["n"] == 3 and res["prompt_bp"] == 6 * (64 - 1 - 4)
    assert 0 <= res["exact_match"] <= res["base_accuracy"] <= 1


def test_planted_value_retrieval_takes_the_near_duplicate_tasks(carbon: Carbon) -> None:
    res = planted_value_retrieval(carbon, far_human_file(), n=2, ctx_tokens=128, task="neardup_d2")
    assert res["n"] == 2 and 0 <= res["exact_match"] <= res["base_accuracy"] <= 1
    with pytest.raises(ValueError, match="unknown NIAH task"):
        planted_value_retrieval(carbon, far_human_file(), n=2, ctx_tokens=128, task="neardup")


def test_distinct_kmers() -> None:
    assert distinct_kmers("A" * 300) == 1
    assert distinct_kmers("ACGTAC") == 1 and distinct_kmers("ACGTACG") == 2
    assert distinct_kmers("ACG") == 0
