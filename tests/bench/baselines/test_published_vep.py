"""The published-scripts baseline (transformers, full-vocab logits) gives the engine's scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.bench.baselines.published_vep import PublishedScorer, published_scores
from hexamer.vep import Reference, read_vcf, score_variants
from hexamer.vep.recipes import NextBaseContext, context_anchor, leading_n
from tests.vep.conftest import EDGE_VCF, FASTA, SLICE_VCF

pytest.importorskip("transformers")

TOL = 1e-4


@pytest.fixture(scope="module")
def scorer(tiny_folder: Path) -> PublishedScorer:
    return PublishedScorer(tiny_folder, device="cpu")


def engine_scores(
    carbon: Carbon, vcf: Path, *, indels: bool = False, **options: object
) -> dict[tuple[int, int], float]:
    """The engine's ``ok`` scores; without ``indels`` those of equal-length changes only: the
    engine gives an indel's windows equal lengths, the published scripts do not."""
    rows = score_variants(carbon, vcf, FASTA, on_note=lambda _: None, **options)  # type: ignore[arg-type]
    return {
        (r["record"], r["alt_index"]): r["score"]
        for r in rows
        if r["status"] == "ok" and (indels or len(r["ref"]) == len(r["alt"]))
    }


def assert_same(ours: dict, engine: dict) -> None:
    assert engine and engine.keys() <= ours.keys()
    assert max(abs(ours[k] - engine[k]) for k in engine) <= TOL


@pytest.mark.parametrize("rc_average", [False, True])
@pytest.mark.parametrize("vcf", [SLICE_VCF, EDGE_VCF], ids=["slice", "edge"])
def test_window_equals_engine(scorer: PublishedScorer, carbon: Carbon, vcf: Path, rc_average: bool) -> None:
    options = {"recipe": "window", "window": 600, "rc_average": rc_average}
    assert_same(scorer.scores(vcf, FASTA, **options), engine_scores(carbon, vcf, **options))  # type: ignore[arg-type]


@pytest.mark.parametrize("vcf", [SLICE_VCF, EDGE_VCF], ids=["slice", "edge"])
def test_next_base_equals_engine(scorer: PublishedScorer, carbon: Carbon, vcf: Path) -> None:
    options = {"recipe": "next_base", "context": 600, "context_grid": 300}
    ours = scorer.scores(vcf, FASTA, **options)  # type: ignore[arg-type]
    assert_same(ours, engine_scores(carbon, vcf, **options))
    # the context rules are exercised: some contexts start in the chr20 N run (leading N dropped)
    ctx = NextBaseContext.for_model(600, 300, carbon.context_length)
    with Reference(FASTA) as ref:
        starts = [
            (r.pos - 1, context_anchor(r.pos - 1, ctx.context, ctx.grid))
            for r in read_vcf(vcf)
            if r.chrom == "20" and len(r.ref) == 1
        ]
        assert any(leading_n(ref.fetch("20", a, p0)) > 0 for p0, a in starts)


def test_full_vocab_logits_and_wrapper(scorer: PublishedScorer, tiny_folder: Path) -> None:
    lay = scorer.layout
    assert scorer._logits([lay.begin_id, lay.kmer_start]).shape == (2, scorer.model.config.vocab_size)
    assert scorer.model.config.vocab_size >= lay.kmer_stop
    direct = published_scores(tiny_folder, SLICE_VCF, FASTA, recipe="next_base", context=300, device="cpu")
    assert direct == scorer.scores(SLICE_VCF, FASTA, recipe="next_base", context=300)


def test_rc_average_is_window_only(scorer: PublishedScorer) -> None:
    with pytest.raises(ValueError, match="rc_average"):
        scorer.scores(SLICE_VCF, FASTA, recipe="next_base", rc_average=True)


def test_window_grid_equals_engine(scorer: PublishedScorer, carbon: Carbon) -> None:
    options = {"recipe": "window", "window": 600, "window_grid": 200}
    assert_same(scorer.scores(SLICE_VCF, FASTA, **options), engine_scores(carbon, SLICE_VCF, **options))  # type: ignore[arg-type]


def test_indels_differ_on_purpose(scorer: PublishedScorer, carbon: Carbon) -> None:
    """The published scripts score an indel's windows with different numbers of bases; the
    engine extends the shorter window (docs/vep.md), so their indel scores differ."""
    options = {"recipe": "window", "window": 600}
    ours = scorer.scores(EDGE_VCF, FASTA, **options)  # type: ignore[arg-type]
    engine = engine_scores(carbon, EDGE_VCF, indels=True, **options)  # type: ignore[arg-type]
    rows = {
        (r["record"], r["alt_index"]): r
        for r in score_variants(carbon, EDGE_VCF, FASTA, on_note=lambda _: None, **options)
    }  # type: ignore[arg-type]
    indels = [key for key in engine if len(rows[key]["ref"]) != len(rows[key]["alt"])]
    assert indels
    assert all(abs(ours[k] - engine[k]) > TOL for k in indels)
