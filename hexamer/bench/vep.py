"""``hexamer bench vep`` in Python: the VEP engine timed against its own naive recipe on the same variants.

The naive recipe (``score_variants(..., naive=True)``) computes the same numbers the slow, obvious
way, so the two runs must agree to rounding; the published-scripts baseline (``transformers``, full
vocabulary) is :mod:`hexamer.bench.baselines.published_vep`.

    from hexamer.bench.vep import bench_vep
    from hexamer.testing.vcf import write_random_vcf
    write_random_vcf("ref.fa", "sites.vcf", n_sites=200)
    print(bench_vep(carbon, "sites.vcf", "ref.fa", recipe="window").as_dict())
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from hexamer.vep.engine import score_variants

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["VepBench", "bench_vep"]

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
        best = math.inf
        scores: dict[Key, float] = {}
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            rows = list(
                score_variants(
                    carbon, vcf, fasta, recipe=recipe, naive=naive, on_note=lambda _: None, **options
                )
            )
            best = min(best, time.perf_counter() - t0)
            scores = {(r["record"], r["alt_index"]): r["score"] for r in rows if r["status"] == "ok"}
        return best, scores

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
