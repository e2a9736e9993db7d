"""``hexamer bench ism`` in Python: saturation mutagenesis of a region against scoring the same
SNVs one by one with the published per-variant recipe (:mod:`hexamer.bench.baselines.published_vep`:
``transformers``, full-vocabulary logits, a ref and an alt window forward per variant, or one
context forward per variant).

Both sides compute the same recipe with the same settings, so the scores must agree to rounding
(``max_abs_diff``); the speed ratio is what the sharing buys: the window recipe runs each tile's
reference window once and each alt window only after the changed base, the next-base recipe reads
every position of a context from one forward.
"""

from __future__ import annotations

import math
import os
import random
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexamer.bench.common import recipe_options
from hexamer.ism.mutagenesis import ism_settings, saturation_mutagenesis

if TYPE_CHECKING:
    from hexamer.bench.baselines.published_vep import PublishedScorer
    from hexamer.carbon import Carbon

__all__ = ["IsmBench", "bench_ism", "write_variants_vcf"]

PathLike = str | os.PathLike[str]


@dataclass
class IsmBench:
    """ISM of one region against the published per-variant recipe on the same SNVs."""

    recipe: str
    region: str
    n_variants: int
    ism_s: float
    published_s: float
    speedup: float
    max_abs_diff: float
    settings: dict[str, Any]
    #: SNVs the published recipe scored (all of them, or a seeded sample whose time is scaled up)
    n_published: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_variants_vcf(path: PathLike, rows: list[dict[str, Any]]) -> None:
    """The rows' variants as a VCF, one record per row (record i = row i)."""
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    lines += [f"{r['chrom']}\t{r['pos']}\t.\t{r['ref']}\t{r['alt']}\t.\t.\t." for r in rows]
    Path(path).write_text("\n".join(lines) + "\n")


def bench_ism(
    carbon: Carbon,
    scorer: PublishedScorer,
    fasta: PathLike,
    region: str,
    *,
    recipe: str = "window",
    repeats: int = 1,
    published_sample: int | None = None,
    **options: Any,
) -> IsmBench:
    """Time :func:`~hexamer.ism.saturation_mutagenesis` of ``region`` and the published scorer on
    its ``ok`` SNVs, alternating the two each round (best of ``repeats`` each).

    ``published_sample``: the published recipe scores only this many of the SNVs (drawn with a
    fixed seed) and its time is scaled to all of them. Its cost per SNV does not depend on the SNV
    (one or two forwards of a fixed length each), so this measures a region whose one-by-one
    scoring would take hours; the scores are still compared on every SNV of the sample."""
    if published_sample is not None and published_sample < 1:
        raise ValueError(f"published_sample must be >= 1, got {published_sample}")
    settings = ism_settings(recipe=recipe, **options)
    fields = {k: getattr(settings, k) for k in ("recipe", "window", "window_grid", "context", "context_grid")}
    fields["rc_average"] = settings.rc_average
    ism_best = pub_best = math.inf
    ok: list[dict[str, Any]] = []  # the ISM's scored SNVs (the same every round)
    sample: list[dict[str, Any]] = []  # those the published recipe scores
    published: dict[tuple[int, int], float] = {}
    with tempfile.TemporaryDirectory(prefix="hexamer-bench-ism-") as tmp:
        vcf = Path(tmp) / "ism.vcf"
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            rows = saturation_mutagenesis(carbon, fasta, region=region, on_note=lambda _: None, **fields)
            ism_best = min(ism_best, time.perf_counter() - t0)
            ok = [r for r in rows if r["status"] == "ok"]
            sample = _sample(ok, published_sample)
            write_variants_vcf(vcf, sample)
            t0 = time.perf_counter()
            published = scorer.scores(vcf, fasta, **fields)
            pub_best = min(pub_best, time.perf_counter() - t0)
    missing = [i for i in range(len(sample)) if (i, 0) not in published]
    if missing:
        raise RuntimeError(f"the published recipe did not score {len(missing)} of the ISM's variants")
    diff = max((abs(r["score"] - published[(i, 0)]) for i, r in enumerate(sample)), default=0.0)
    if sample:
        pub_best *= len(ok) / len(sample)  # the same cost per SNV for every SNV
    return IsmBench(
        recipe=recipe,
        region=region,
        n_variants=len(ok),
        ism_s=ism_best,
        published_s=pub_best,
        speedup=pub_best / ism_best if ism_best else math.inf,
        max_abs_diff=diff,
        settings=fields,
        n_published=len(sample),
    )


def _sample(rows: list[dict[str, Any]], size: int | None) -> list[dict[str, Any]]:
    """``rows``, or ``size`` of them drawn with a fixed seed, in their order."""
    if size is None or size >= len(rows):
        return rows
    keep = sorted(random.Random(0).sample(range(len(rows)), size))
    return [rows[i] for i in keep]


def run_ism_bench(
    *,
    folder: str,
    fasta: PathLike,
    region: str,
    recipes: tuple[str, ...] = ("window", "next_base"),
    dtype: str = "float32",
    repeats: int = 1,
    published_sample: int | None = None,
    **options: Any,
):  # -> BenchReport
    """One row per (recipe, method): ISM and the published per-variant recipe, with the speed-up."""
    from hexamer.bench.baselines.published_vep import PublishedScorer
    from hexamer.bench.report import BenchReport
    from hexamer.carbon import Carbon

    carbon = Carbon.from_pretrained(folder, dtype=dtype)
    scorer = PublishedScorer(folder, dtype=dtype, device=carbon.model.device)
    report = BenchReport(
        name="ism",
        title=f"ISM of {region} vs the published per-variant recipe ({Path(folder).name}, {dtype})",
        columns=["recipe", "method", "variants", "seconds", "variants/s", "speed-up", "max abs diff"],
        formats={
            "seconds": "{:.2f}",
            "variants/s": "{:,.1f}",
            "speed-up": "{:.1f}×",
            "max abs diff": "{:.1e}",
        },
    )
    for recipe in recipes:
        opts = recipe_options(recipe, options)
        b = bench_ism(
            carbon,
            scorer,
            fasta,
            region,
            recipe=recipe,
            repeats=repeats,
            published_sample=published_sample,
            **opts,
        )
        common = {"recipe": recipe, "variants": b.n_variants}
        report.rows.append(
            {
                **common,
                "method": "hexamer ism",
                "seconds": b.ism_s,
                "variants/s": b.n_variants / b.ism_s if b.ism_s else math.inf,
                "speed-up": b.speedup,
                "max abs diff": b.max_abs_diff,
            }
        )
        report.rows.append(
            {
                **common,
                "method": "published per-variant (transformers)",
                "seconds": b.published_s,
                "variants/s": b.n_variants / b.published_s if b.published_s else math.inf,
                "speed-up": 1.0,
            }
        )
        shown = ", ".join(f"{k}={v}" for k, v in b.settings.items() if k in (*opts, "recipe"))
        report.notes.append(f"{recipe}: {shown}")
        if b.n_published < b.n_variants:
            report.notes.append(
                f"{recipe}: the published recipe scored {b.n_published} of the {b.n_variants} SNVs (seeded "
                "sample); its seconds are scaled to all of them and max abs diff is over the sample"
            )
    report.notes.append(
        "published per-variant = LlamaForCausalLM(...)(input_ids).logits over the full vocabulary, one ref and "
        "one alt window forward per SNV (window) or one context forward per SNV (next_base), then FNS; "
        "max abs diff = largest |ISM score - published score| over the same SNVs; rounds alternate the two"
    )
    return report
