"""The tech report's published numbers in one table, from which every task's ``Task.reference`` is built.

The headline table (token level) gives one number per task for Carbon-3B, Carbon-8B, GENERator-v2-3B
and Evo2-7B; Table S1 gives the bp-level numbers of Carbon-3B and Carbon-8B. Both are kept here as
fractions (the report prints %), keyed by the task's CLI name together with the task's headline
metric. What only one task has (per-run values committed to the public repository, per-cell NIAH
numbers) stays with the task and is merged in by :func:`published_reference`.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["BP_LEVEL", "HEADLINE", "REFERENCE_MODELS", "published_reference"]

#: the models of the report's headline table, in its column order
REFERENCE_MODELS = ("Carbon-3B", "Carbon-8B", "GENERator-v2-3B", "Evo2-7B")

#: task -> (headline metric, value per :data:`REFERENCE_MODELS`; ``None`` where not published)
HEADLINE: dict[str, tuple[str, tuple[float | None, ...]]] = {
    "sr": ("accuracy", (0.6154, 0.6405, 0.5856, 0.5986)),
    "brca2": ("auroc", (0.8463, 0.8572, 0.8193, 0.8352)),
    "traitgym": ("auprc_by_chrom_weighted", (0.3365, 0.3643, 0.2791, 0.3778)),
    "clinvar_coding": ("auroc", (0.9289, 0.9311, 0.9155, 0.9333)),
    "clinvar_noncoding": ("auroc", (0.9114, 0.9163, 0.9013, 0.8979)),
    "triplet": ("accuracy", (0.8520, 0.8905, 0.8306, 0.8843)),
    "codon": ("accuracy", (0.8889, 0.9146, 0.8703, 0.9159)),
    "niah": ("gen_exact_match", (0.79, 0.86, None, 0.80)),  # GENERator: 16k context, not run
}

#: Table S1, task -> (Carbon-3B, Carbon-8B) at bp level, for the headline metric
BP_LEVEL: dict[str, tuple[float, float]] = {
    "sr": (0.624, 0.649),
    "brca2": (0.846, 0.858),
    "traitgym": (0.345, 0.338),
    "triplet": (0.872, 0.908),
    "codon": (0.902, 0.928),
}


def published_reference(
    task: str, extra: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, dict[str, float]]:
    """``Task.reference`` of ``task``: model -> {metric: fraction}. The headline models first, then
    ``"Carbon-3B bp-level"``/``"Carbon-8B bp-level"`` where Table S1 has the task, then ``extra``
    (a model already listed gets the extra metrics added after its headline one)."""
    metric, values = HEADLINE[task]
    out = {m: {metric: v} for m, v in zip(REFERENCE_MODELS, values, strict=True) if v is not None}
    if task in BP_LEVEL:
        for size, v in zip(("3B", "8B"), BP_LEVEL[task], strict=True):
            out[f"Carbon-{size} bp-level"] = {metric: v}
    for model, metrics in (extra or {}).items():
        out.setdefault(model, {}).update(metrics)
    return out
