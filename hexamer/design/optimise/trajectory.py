"""What an optimisation run did, step by step, and its figure.

Each :class:`Step` records the sequence the run holds after that step (its best, for evolution;
its current state, for annealing), the objective and its two terms, and the edits from the start
sequence. :func:`plot_trajectory` draws the objective and the oracle over the steps, with the
likelihood per base on a second panel; the figure follows :mod:`hexamer.plots` (Agg canvas, no
pyplot, format from the extension, written atomically).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hexamer.design.optimise.edits import Edit
from hexamer.io import atomic_path
from hexamer.plots import FIGURE_FORMATS

__all__ = ["OptimiseResult", "Step", "plot_trajectory"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Step:
    """One step: ``step`` 0 is the start; ``accepted`` whether the step moved the run."""

    step: int
    sequence: str
    objective: float
    oracle: float
    likelihood: float
    edits: tuple[Edit, ...]
    accepted: bool = True
    temperature: float | None = None
    candidates: int = 0

    def as_row(self) -> dict[str, Any]:
        """A flat row (edits as text like ``A12G;C40T``, 1-based positions)."""
        return {
            "step": self.step,
            "sequence": self.sequence,
            "objective": self.objective,
            "oracle": self.oracle,
            "likelihood": None if np.isnan(self.likelihood) else self.likelihood,
            "n_edits": len(self.edits),
            "edits": ";".join(str(e) for e in self.edits),
            "accepted": self.accepted,
            "temperature": self.temperature,
            "candidates": self.candidates,
        }


@dataclass
class OptimiseResult:
    """The best sequence found, its scores and edits from the start, the final population
    (evolution: up to ``keep`` sequences, best first) and the per-step trajectory."""

    sequence: str
    objective: float
    oracle: float
    likelihood: float
    edits: tuple[Edit, ...]
    trajectory: list[Step] = field(default_factory=list)
    population: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        return [s.as_row() for s in self.trajectory]


def plot_trajectory(path: PathLike, trajectory: list[Step], *, title: str | None = None) -> None:
    """The objective and oracle per step (top) and the log-likelihood per base (bottom, when the
    run computed it), written to ``path`` (.png, .svg or .pdf)."""
    from matplotlib.figure import Figure

    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if ext not in FIGURE_FORMATS:
        raise ValueError(
            f"{os.fspath(path)!r}: figures are written as {', '.join('.' + f for f in FIGURE_FORMATS)}"
        )
    if not trajectory:
        raise ValueError("an empty trajectory has nothing to plot")
    steps = np.array([s.step for s in trajectory])
    ll = np.array([s.likelihood for s in trajectory], dtype=np.float64)
    has_ll = bool(np.isfinite(ll).any())
    fig = Figure(figsize=(6.5, 5.5 if has_ll else 3.5), layout="constrained")
    axes = fig.subplots(2 if has_ll else 1, 1, sharex=True, squeeze=False)[:, 0]
    top = axes[0]
    top.plot(steps, [s.objective for s in trajectory], marker=".", label="objective")
    top.plot(steps, [s.oracle for s in trajectory], marker=".", linestyle="--", label="oracle")
    top.set_ylabel("score (larger is better)")
    top.legend(loc="best", fontsize="small")
    if title:
        top.set_title(title)
    if has_ll:
        axes[1].plot(steps, ll, marker=".", color="tab:green")
        axes[1].set_ylabel("log-likelihood per base, nats\n(uniform guessing: −1.386)")
    axes[-1].set_xlabel("step")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=ext, dpi=150)
