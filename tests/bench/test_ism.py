"""``hexamer bench ism``: ISM and the published per-variant recipe agree on the same SNVs."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.bench.ism import bench_ism

pytest.importorskip("transformers")
FASTA = Path(__file__).resolve().parents[1] / "data" / "vep" / "chr20_slice.fa.gz"
warnings.filterwarnings("ignore", category=UserWarning, module="hexamer")


@pytest.mark.parametrize(
    ("recipe", "options"),
    [
        ("window", {"window": 240}),
        pytest.param("window", {"window": 240, "rc_average": True}, marks=pytest.mark.slow),
        ("next_base", {"context": 240, "context_grid": 60}),
    ],
)
def test_ism_equals_published_per_variant(tiny_folder, recipe, options) -> None:
    from hexamer.bench.baselines.published_vep import PublishedScorer

    carbon = Carbon.from_pretrained(tiny_folder)
    scorer = PublishedScorer(tiny_folder, device="cpu")
    b = bench_ism(carbon, scorer, FASTA, "20:60301-60304", recipe=recipe, **options)
    assert b.n_variants == 12 and b.max_abs_diff <= 1e-4
    assert b.ism_s > 0 and b.published_s > 0 and b.speedup == pytest.approx(b.published_s / b.ism_s)
    assert b.settings["recipe"] == recipe


def test_published_sample_scores_a_seeded_subset(tiny_folder) -> None:
    from hexamer.bench.baselines.published_vep import PublishedScorer

    carbon = Carbon.from_pretrained(tiny_folder)
    scorer = PublishedScorer(tiny_folder, device="cpu")
    options = {"context": 240, "context_grid": 60}
    b = bench_ism(carbon, scorer, FASTA, "20:60301-60304", recipe="next_base", published_sample=5, **options)
    assert (b.n_variants, b.n_published) == (12, 5) and b.max_abs_diff <= 1e-4
    with pytest.raises(ValueError, match="published_sample"):
        bench_ism(carbon, scorer, FASTA, "20:60301-60304", recipe="next_base", published_sample=0, **options)


def test_bench_ism_refuses_bad_inputs_by_name(tmp_path) -> None:
    """A pipe as --fasta, an unknown recipe: usage errors; a missing FASTA: one error line."""
    from hexamer.testing.cli import error_message, run, usage_error

    assert "--fasta" in usage_error(["bench", "ism", "--fasta", "-", "--region", "x:1-2"]).format_message()
    assert "--recipes" in usage_error(["bench", "ism", "--recipes", "foo"]).format_message()
    missing = run(["bench", "ism", "--fasta", str(tmp_path / "absent.fa"), "--region", "x:1-2"])
    assert missing.exit_code != 0 and "no such FASTA file" in error_message(missing)
