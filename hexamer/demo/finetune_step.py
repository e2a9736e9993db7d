"""The demo's fine-tuning step: a linear probe on the built-in model beside the k-mer baseline.

A few hundred windows of real human DNA (chr20) with simulated labels
(:mod:`hexamer.demo.motif_task`: ``activity`` = planted AP-1 sites + noise, ``gc`` = GC fraction)
go through the same run as ``hexamer finetune`` (read, split by chromosome label, z-score, k-mer
baseline, fit, report). The probe (mean-pooled features, ridge head in closed form) takes a few
seconds; the point is the comparison, printed and written, not a good model: the 4-layer demo
model's features carry GC content but not a 7-bp motif count, which the baseline reads directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hexamer.io import write_table

__all__ = ["FINETUNE_FILES", "step_finetune"]

#: what the step writes into the demo's folder (the run's own files go to ``finetune/``)
FINETUNE_FILES = ("motif_task.tsv", "finetune.tsv")
ROWS, LENGTH, SEED = 360, 120, 5


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _shown(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def step_finetune(model: str | os.PathLike[str], out: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Probe and baseline on both labels; ``finetune.tsv`` holds their test Pearson r side by side."""
    from hexamer.demo.motif_task import write_motif_table
    from hexamer.finetune.data import ReadOptions
    from hexamer.finetune.options import FitOptions
    from hexamer.finetune.run import InputSpec, SplitSpec, run_finetune

    table = write_motif_table(out / "motif_task.tsv", n=ROWS, length=LENGTH, seed=SEED)
    read = ReadOptions(task="regression", label_columns=("activity", "gc"))
    split = SplitSpec(valid_chroms=("19",), test_chroms=("7",), seed=SEED)
    options = FitOptions(method="probe", pooling="mean", probe_ridge=1.0, seed=SEED)
    run = run_finetune(str(model), InputSpec(str(table)), out / "finetune", read, options, split=split)
    test, base = run.metrics["model"]["test"], run.metrics["baseline"]["metrics"]["test"]
    rows = [
        {
            "label": name,
            "what": what,
            "probe_test_pearson": _rounded(test["per_target"][name]["pearson"]),
            "kmer_baseline_test_pearson": _rounded(base["per_target"][name]["pearson"]),
        }
        for name, what in (("activity", "planted TGACTCA sites + noise"), ("gc", "GC fraction"))
    ]
    write_table(out / "finetune.tsv", rows)
    n_test = run.metrics["split"]["test"]
    say(
        f"9. fine-tuning: a linear probe (mean-pooled features, ridge head) on {ROWS} windows of real chr20 DNA"
        f" with simulated labels, test Pearson r on {n_test} held-out rows beside a k-mer ridge baseline: "
        + ", ".join(
            f"{r['label']} probe {_shown(r['probe_test_pearson'])} vs baseline {_shown(r['kmer_baseline_test_pearson'])}"
            for r in rows
        )
        + ". GC content is in the demo model's features; a 7-bp motif count is not, and the k-mer counts"
        " read it directly: compare a fine-tuned model with the baseline, not with zero"
        " -> finetune.tsv, finetune/"
    )
    return {"rows": ROWS, "test_rows": n_test, "pearson": {r["label"]: r for r in rows}}
