"""Loss and accuracy curves of a training run, drawn from its ``metrics.jsonl``.

``hexamer train`` writes ``curves.png`` beside ``metrics.jsonl`` whenever it writes the metrics
(each checkpoint and the end), so a run can be judged at a glance: training loss (the objective,
and its token cross-entropy / FNS parts when both are logged) per step on the left, held-out
per-base accuracy per step on the right with the 0.25 of uniform guessing for scale. Losses are
natural-log cross-entropies (nats per token or per base).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["CURVES_FILE", "plot_training_curves", "read_metrics"]

CURVES_FILE = "curves.png"


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (one JSON object per line), in file order."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {n} is not JSON ({exc.msg})") from None
    return rows


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    pairs = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float) and "step" in r]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot_training_curves(
    metrics: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, *, title: str | None = None
) -> Path:
    """Draw ``metrics`` (a ``metrics.jsonl``) as a PNG/SVG/PDF at ``out`` (default: ``curves.png``
    beside it), written atomically; returns the path. Needs matplotlib (extra ``plots``)."""
    from matplotlib.figure import Figure

    from hexamer.io import atomic_path

    metrics = Path(metrics)
    out = Path(out) if out is not None else metrics.with_name(CURVES_FILE)
    rows = read_metrics(metrics)
    fig = Figure(figsize=(10, 4), layout="constrained")
    loss_ax, acc_ax = fig.subplots(1, 2)
    for key, label in (("loss", "objective"), ("ce", "token cross-entropy"), ("fns", "FNS (per base)")):
        steps, values = _series(rows, key)
        if steps and (key == "loss" or len(set(values)) > 0):
            loss_ax.plot(steps, values, label=label, linewidth=1.2 if key == "loss" else 0.8)
    loss_ax.set_xlabel("optimizer step")
    loss_ax.set_ylabel("training loss (nats)")
    loss_ax.set_title("Training loss")
    if loss_ax.get_legend_handles_labels()[0]:
        loss_ax.legend(fontsize="small")
    steps, acc = _series(rows, "val_accuracy")
    if steps:
        acc_ax.plot(steps, acc, marker="o", label="held-out per-base accuracy")
    acc_ax.axhline(0.25, linestyle="--", color="grey", linewidth=0.8, label="uniform guessing (0.25)")
    acc_ax.set_xlabel("optimizer step")
    acc_ax.set_ylabel("accuracy (fraction of bases)")
    acc_ax.set_title("Held-out accuracy" if steps else "Held-out accuracy (no validation yet)")
    acc_ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fmt = out.suffix.lower().lstrip(".") or "png"
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format=fmt, dpi=120)
    return out
