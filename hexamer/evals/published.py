"""Every published number the eval report compares with, in one place; each task's ``Task.reference``
is built from it by :func:`published_reference` (``shared/spec/evals.md`` §0 and §5).

* the tech report's headline table (token level): one number per task for Carbon-3B, Carbon-8B,
  GENERator-v2-3B and Evo2-7B, for the task's headline metric;
* its Table S1: the bp-level numbers of Carbon-3B and Carbon-8B;
* the per-run result files committed to the public repository (an internal Carbon-3B checkpoint run
  with an earlier version of the scripts), which also give AUPRC, Spearman and per-group values;
* Genome-NIAH per cell (the report's Table 5 and Figure 5).

All values are fractions (the report prints %), keyed by the task's CLI name.
"""

from __future__ import annotations

__all__ = ["BP_LEVEL", "HEADLINE", "NIAH_CELLS", "REFERENCE_MODELS", "REPO_RUNS", "published_reference"]

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


#: task -> (model label, {metric: value}) of the result files committed to the public repository
REPO_RUNS: dict[str, tuple[str, dict[str, float]]] = {
    "sr": (
        "Carbon-3B repo run",
        {
            "accuracy": 0.61735,
            "type_accuracy.fungi": 0.5333,
            "type_accuracy.invertebrate": 0.5400,
            "type_accuracy.plant": 0.6380,
            "type_accuracy.protozoa": 0.4286,
            "type_accuracy.vertebrate_mammalian": 0.8320,
            "type_accuracy.vertebrate_other": 0.7323,
        },
    ),
    "brca2": ("Carbon-3B repo run", {"auroc": 0.8497, "auprc": 0.6120, "spearman_score_vs_delta": 0.3663}),
    "traitgym": ("Carbon-3B repo run", {"auroc": 0.6452, "auprc": 0.2994}),
    "clinvar_coding": ("Carbon-3B repo run", {"auroc": 0.9278, "auprc": 0.9481}),
    "clinvar_noncoding": ("Carbon-3B repo run", {"auroc": 0.9107, "auprc": 0.9256}),
    "codon": ("Carbon repo run, older 5,000-pair set", {"accuracy": 0.8376}),
}

#: Genome-NIAH greedy exact match per cell, model -> {cell: value}. The plain model names hold the
#: YaRN runs (how Carbon is published), whose headline ``gen_exact_match`` is plain niah at 64k tokens
#: (393 kbp): compare it with a run restricted to that cell (``-O tasks=niah -O ctx=64k -O
#: with_yarn=true``); "native" holds the runs without YaRN.
NIAH_CELLS: dict[str, dict[str, float]] = {
    "Carbon-3B": {
        "niah_16k": 0.91,
        "niah_32k": 0.90,
        "niah_64k": 0.79,
        "niah_128k": 0.27,
        "niah_neardup_d4_32k": 0.78,
        "niah_neardup_d4_64k": 0.64,
        "niah_neardup_d4_128k": 0.23,
        "niah_neardup_d2_32k": 0.34,
        "niah_neardup_d2_64k": 0.26,
        "niah_neardup_d2_128k": 0.09,
    },
    "Carbon-8B": {
        "niah_16k": 0.89,
        "niah_32k": 0.87,
        "niah_64k": 0.86,
        "niah_128k": 0.65,
        "niah_neardup_d4_32k": 0.71,
        "niah_neardup_d4_64k": 0.69,
        "niah_neardup_d4_128k": 0.47,
        "niah_neardup_d2_32k": 0.26,
        "niah_neardup_d2_64k": 0.29,
        "niah_neardup_d2_128k": 0.22,
    },
    "Evo2-7B": {"niah_16k": 0.97, "niah_32k": 0.95, "niah_64k": 0.80, "niah_128k": 0.53},
    "Carbon-3B native": {
        "niah_8k": 0.81,
        "niah_16k": 0.73,
        "niah_32k": 0.55,
        "niah_neardup_d4_8k": 0.68,
        "niah_neardup_d4_16k": 0.60,
        "niah_neardup_d4_32k": 0.44,
        "niah_neardup_d2_8k": 0.30,
        "niah_neardup_d2_16k": 0.30,
        "niah_neardup_d2_32k": 0.23,
    },
    "Carbon-8B native": {
        "niah_8k": 0.82,
        "niah_16k": 0.78,
        "niah_32k": 0.69,
        "niah_neardup_d4_8k": 0.69,
        "niah_neardup_d4_16k": 0.67,
        "niah_neardup_d4_32k": 0.57,
        "niah_neardup_d2_8k": 0.27,
        "niah_neardup_d2_16k": 0.28,
        "niah_neardup_d2_32k": 0.29,
    },
}


def published_reference(task: str) -> dict[str, dict[str, float]]:
    """``Task.reference`` of ``task``: model -> {metric: fraction}, in this order: the headline models,
    ``"Carbon-3B bp-level"``/``"Carbon-8B bp-level"`` where Table S1 has the task, the repository run;
    for ``niah`` each model's cells as ``"CELL.gen_exact_match"`` after its headline number."""
    metric, values = HEADLINE[task]
    out = {m: {metric: v} for m, v in zip(REFERENCE_MODELS, values, strict=True) if v is not None}
    if task in BP_LEVEL:
        for size, v in zip(("3B", "8B"), BP_LEVEL[task], strict=True):
            out[f"Carbon-{size} bp-level"] = {metric: v}
    if task in REPO_RUNS:
        label, numbers = REPO_RUNS[task]
        out[label] = dict(numbers)
    if task == "niah":
        for model, cells in NIAH_CELLS.items():
            out.setdefault(model, {}).update({f"{cell}.{metric}": v for cell, v in cells.items()})
    return out
