"""Genome-NIAH results: per-cell means and the (difficulty x context) heat-map."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hexamer.evals.task import Record
from hexamer.evals.tasks.niah_cells import DIFFICULTIES, ctx_label

__all__ = ["niah_summary", "plot_niah_heatmap"]


def niah_summary(records: list[Record]) -> dict[str, float]:
    def mean(key: str) -> float:
        vals = [r[key] for r in records if r.get(key) is not None]
        return float(np.mean(vals)) if vals else float("nan")

    return {
        "n": float(len(records)),
        "gen_exact_match": mean("gen_exact_match"),
        "gen_base_accuracy": mean("gen_base_accuracy"),
        "ll_correct": mean("ll_correct"),
        "ll_margin": mean("ll_margin"),
    }


def plot_niah_heatmap(
    path: Path,
    values: dict[tuple[str, int], float],
    counts: dict[tuple[str, int], int] | None = None,
    *,
    title: str = "Genome-NIAH exact match",
) -> Path:
    """Write a (difficulty x context) heat-map of ``values[(task, ctx_tokens)]`` in [0, 1] as PNG."""
    from matplotlib.figure import Figure

    from hexamer.io import atomic_path

    tasks = [t for t in DIFFICULTIES if any(k[0] == t for k in values)]
    tasks += sorted({k[0] for k in values} - set(tasks))
    ctxs = sorted({k[1] for k in values})
    grid = np.full((len(tasks), len(ctxs)), np.nan)
    for (t, c), v in values.items():
        grid[tasks.index(t), ctxs.index(c)] = v
    fig = Figure(figsize=(1.3 * len(ctxs) + 2.5, 0.7 * len(tasks) + 1.8), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(grid), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(ctxs)), [ctx_label(c) for c in ctxs])
    ax.set_yticks(range(len(tasks)), tasks)
    ax.set_xlabel("context (6-mer tokens)")
    ax.set_ylabel("task (difficulty)")
    for i in range(len(tasks)):
        for j in range(len(ctxs)):
            if np.isfinite(grid[i, j]):
                n = (counts or {}).get((tasks[i], ctxs[j]))
                label = f"{grid[i, j]:.2f}" + (f"\nn={n}" if n is not None else "")
                ax.text(
                    j,
                    i,
                    label,
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if grid[i, j] > 0.6 else "white",
                )
    fig.colorbar(image, ax=ax, label="exact match")
    ax.set_title(title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=150)
    return path
