"""``hexamer bench vep`` in Python: the VEP engine timed against its own naive recipe on the same variants.

The naive recipe (``score_variants(..., naive=True)``) computes the same numbers the slow, obvious
way, so the two runs must agree to rounding; the published-scripts baseline (``transformers``, full
vocabulary) is :mod:`hexamer.bench.baselines.published_vep`.

    from hexamer.bench.vep import bench_vep
    from hexamer.synthetic.vcf import write_random_vcf
    write_random_vcf("ref.fa", "sites.vcf", n_sites=200)
    print(bench_vep(carbon, "sites.vcf", "ref.fa", recipe="window").as_dict())
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexamer.bench.common import BenchOptionError, bench_model_folder, recipe_options
from hexamer.bench.report import BenchReport
from hexamer.bench.timing import best_of
from hexamer.cache import cache_root
from hexamer.vep.scoring import score_variants

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["VepBench", "bench_vep", "run_vep_bench"]

PathLike = str | os.PathLike[str]
Key = tuple[int, int]


@dataclass
class VepBench:
    """Throughput of the engine against the naive recipe on the same variants."""

    recipe: str
    n_variants: int
    engine_s: float
    naive_s: float
    engine_variants_per_s: float
    naive_variants_per_s: float
    speedup: float
    max_abs_diff: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def bench_vep(
    carbon: Carbon,
    vcf: PathLike,
    fasta: PathLike,
    *,
    recipe: str = "window",
    repeats: int = 1,
    **options: Any,
) -> VepBench:
    """Time :func:`score_variants` with the engine and with ``naive=True`` on the same input.

    Variants per second count the ``ok`` rows; ``max_abs_diff`` is the largest score difference
    between the two (they compute the same recipe, so it is rounding only). Best of ``repeats``.
    """

    def run(naive: bool) -> tuple[float, dict[Key, float]]:
        seconds, rows = best_of(
            lambda: list(
                score_variants(
                    carbon, vcf, fasta, recipe=recipe, naive=naive, on_note=lambda _: None, **options
                )
            ),
            repeats,
        )
        return seconds, {(r["record"], r["alt_index"]): r["score"] for r in rows if r["status"] == "ok"}

    engine_s, engine = run(False)
    naive_s, naive = run(True)
    if engine.keys() != naive.keys():
        raise RuntimeError("engine and naive runs scored different variants")
    n = len(engine)
    diff = max((abs(engine[k] - naive[k]) for k in engine), default=0.0)
    return VepBench(
        recipe=recipe,
        n_variants=n,
        engine_s=engine_s,
        naive_s=naive_s,
        engine_variants_per_s=n / engine_s if engine_s else math.inf,
        naive_variants_per_s=n / naive_s if naive_s else math.inf,
        speedup=naive_s / engine_s if engine_s else math.inf,
        max_abs_diff=diff,
    )


def _wants_published(
    recipes: tuple[str, ...],
    model: str | None,
    shape: str,
    published: bool | None,
    vcf: Path | None,
    fasta: Path | None,
) -> bool:
    """Check the options before any model is loaded; whether to time the published scripts too
    (default: when ``transformers`` is installed)."""
    import importlib.util

    from hexamer.synthetic import SHAPES

    bad = [r for r in recipes if r not in ("window", "next_base")]
    if not recipes or bad:
        raise BenchOptionError(f"--recipes must be a comma-separated subset of window, next_base; got {bad}")
    if model is None and shape not in SHAPES:
        raise BenchOptionError(f"--shape must be one of {sorted(SHAPES)}")
    has_transformers = importlib.util.find_spec("transformers") is not None
    if published and not has_transformers:
        raise BenchOptionError("--published needs transformers (pip install 'hexamer[hf]')")
    if vcf is not None and fasta is None:
        raise BenchOptionError("--vcf needs --fasta (the reference its positions refer to)")
    return has_transformers if published is None else published


def _vep_report(title: str) -> BenchReport:
    """The empty table: one row per (recipe, method)."""
    return BenchReport(
        name="vep",
        title=title,
        columns=[
            "recipe",
            "method",
            "variants",
            "seconds",
            "variants/s",
            "speed-up",
            "× vs engine",
            "max abs diff",
        ],
        formats={
            "seconds": "{:.2f}",
            "variants/s": "{:,.1f}",
            "speed-up": "{:.2f}×",
            "× vs engine": "{:.2f}×",
            "max abs diff": "{:.1e}",
        },
    )


def _write_random_sites(reference: PathLike, vcf: Path, sites: int, alts_per_site: int, span: int) -> None:
    """``sites`` random SNV sites in the first ``span`` bp of the reference's first contig."""
    from hexamer.io.reference import Reference
    from hexamer.synthetic.vcf import write_random_vcf

    with Reference(reference) as ref:
        contig, length = next(iter(ref.lengths.items()))
    write_random_vcf(
        reference, vcf, n_sites=sites, alts_per_site=alts_per_site, region=(contig, 0, min(span, length))
    )


def _engine_and_naive_rows(b: VepBench) -> list[dict[str, Any]]:
    """The engine's row and the naive recipe's, from one :func:`bench_vep`."""
    common = {"recipe": b.recipe, "variants": b.n_variants}
    return [
        {
            **common,
            "method": "hexamer engine",
            "seconds": b.engine_s,
            "variants/s": b.engine_variants_per_s,
            "speed-up": b.speedup,
            "× vs engine": 1.0,
            "max abs diff": b.max_abs_diff,
        },
        {
            **common,
            "method": "naive (hexamer model)",
            "seconds": b.naive_s,
            "variants/s": b.naive_variants_per_s,
            "× vs engine": b.engine_s / b.naive_s if b.naive_s else math.inf,
        },
    ]


def _published_row(
    carbon: Carbon,
    scorer: Any,
    vcf: PathLike,
    reference: PathLike,
    b: VepBench,
    repeats: int,
    options: dict[str, Any],
) -> dict[str, Any]:
    """The published scripts' row: best of ``repeats``, scores compared with the engine's on the
    equal-length changes (the published scripts give an indel's windows different lengths,
    :mod:`hexamer.bench.baselines.published_vep`)."""
    recipe = b.recipe
    rows = score_variants(carbon, vcf, reference, recipe=recipe, on_note=lambda _: None, **options)
    engine = {
        (r["record"], r["alt_index"]): r["score"]
        for r in rows
        if r["status"] == "ok" and len(r["ref"]) == len(r["alt"])
    }
    best, scores = best_of(lambda: scorer.scores(vcf, reference, recipe=recipe, **options), repeats)
    if not engine.keys() <= scores.keys():
        raise RuntimeError(f"engine and published-scripts runs scored different variants ({recipe})")
    scores = {key: scores[key] for key in engine}
    return {
        "recipe": recipe,
        "variants": len(scores),
        "method": "transformers (published scripts)",
        "seconds": best,
        "variants/s": len(scores) / best if best else math.inf,
        "× vs engine": b.engine_s / best if best else math.inf,
        "max abs diff": max((abs(scores[k] - engine[k]) for k in scores), default=0.0),
    }


def _vep_notes(report: BenchReport, scorer: Any, gains: list[str]) -> None:
    """What each method computes, and the engine's speed-up over the published scripts."""
    import importlib.util

    report.notes.append(
        "naive (hexamer model) = one full reference and one full alternate forward per variant (one per "
        "context for next_base), computing only the 4,096 6-mer rows of the LM head"
    )
    if scorer is not None:
        report.notes.append(
            "transformers (published scripts) = LlamaForCausalLM(...)(input_ids).logits over the full "
            f"vocabulary ({scorer.model.config.vocab_size:,} ids) at every position, one forward per window "
            "or context, then FNS; max abs diff vs the engine's scores. Engine speed-up over it: "
            + ", ".join(gains)
        )
    elif importlib.util.find_spec("transformers") is None:
        report.notes.append(
            "transformers is not installed: published-scripts baseline skipped (pip install 'hexamer[hf]')"
        )
    report.notes.append("× vs engine = the method's variants/s relative to the engine's (1.00× = as fast)")


def run_vep_bench(
    *,
    model: str | None = None,
    shape: str = "tiny",
    fasta: Path | None = None,
    recipes: tuple[str, ...] = ("window", "next_base"),
    sites: int = 16,
    alts_per_site: int = 3,
    span: int = 12000,
    window: int = 8192,
    window_grid: int = 1,
    vcf: Path | None = None,
    context: int = 6144,
    context_grid: int = 6144,
    rc_average: bool = False,
    dtype: str = "float32",
    repeats: int = 1,
    quick: bool = False,
    published: bool | None = None,
) -> BenchReport:
    """One row per (recipe, method); ``quick`` shrinks the workload to seconds on the tiny model.

    Methods: the engine, the naive recipe on hexamer's model (6-mer rows of the head only) and,
    with ``published`` (default: when ``transformers`` is installed), the published scripts' way
    (:mod:`hexamer.bench.baselines.published_vep`: ``transformers``, full-vocabulary logits, one forward per window
    or context). ``× vs engine`` is each method's speed relative to the engine. ``vcf`` scores a
    real variant file (against ``fasta``) instead of ``sites`` random SNVs.
    """
    from hexamer.carbon import Carbon
    from hexamer.demo import demo_data_files

    published = _wants_published(recipes, model, shape, published, vcf, fasta)
    if quick:
        sites, window, context, context_grid, span = min(sites, 6), min(window, 1200), 1200, 1200, 4000
        window_grid = min(window_grid, window // 2)
    folder = model or str(bench_model_folder(shape, cache_root(), dtype))
    carbon = Carbon.from_pretrained(folder, dtype=dtype)
    scorer = None
    if published:
        from hexamer.bench.baselines.published_vep import PublishedScorer

        scorer = PublishedScorer(folder, dtype=dtype, device=carbon.model.device)
    reference = fasta or next(p for p in demo_data_files() if "chr20" in p.name)
    workload = Path(vcf).name if vcf is not None else f"{sites} sites × {alts_per_site} alts"
    if window_grid > 1:
        workload += f", window grid {window_grid} bp"
    report = _vep_report(
        f"VEP engine vs naive recipe{' and published scripts' if scorer else ''} "
        f"({workload}, {Path(folder).name}, {dtype})"
    )
    given = {
        "window": window,
        "window_grid": window_grid,
        "rc_average": rc_average,
        "context": context,
        "context_grid": context_grid,
    }
    gains: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if vcf is None:
            vcf = Path(tmp) / "sites.vcf"
            _write_random_sites(reference, vcf, sites, alts_per_site, span)
        for recipe in recipes:
            options = recipe_options(recipe, given)
            b = bench_vep(carbon, vcf, reference, recipe=recipe, repeats=repeats, **options)
            report.rows += _engine_and_naive_rows(b)
            if scorer is None:
                continue
            row = _published_row(carbon, scorer, vcf, reference, b, repeats, options)
            report.rows.append(row)
            best = row["seconds"]
            gains.append(f"{best / b.engine_s:.1f}× ({recipe})" if b.engine_s else f"∞ ({recipe})")
    _vep_notes(report, scorer, gains)
    return report
