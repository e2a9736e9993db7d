"""ISM figures: a heat-map (base x position) and a sequence-logo style importance plot.

Both are drawn on ``matplotlib.figure.Figure`` with the Agg canvas (no pyplot, no display) and
written atomically in the format of the extension (.png, .svg, .pdf). Scores are shown as
*effects* in the deleterious direction's opposite: for the window recipe the raw score
``LL(alt) - LL(ref)`` (negative: the alt is less likely), for the next-base recipe its negation
``log P(alt) - log P(ref)``, so on both the colour scale red (< 0) means "the model dislikes this
change" and the scale is centred at 0 (no change). Unscored cells (N bases, skipped rows) are grey.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hexamer.io import atomic_path

__all__ = ["effect_matrix", "plot_heatmap", "plot_logo"]

PathLike = str | os.PathLike[str]
BASES = "ACGT"
_COLOURS = {"A": "#2ca02c", "C": "#1f77b4", "G": "#ff7f0e", "T": "#d62728", "N": "#7f7f7f"}
_SIGN = {"window": 1.0, "next_base": -1.0}


def effect_matrix(rows: Sequence[Mapping[str, Any]]) -> tuple[list[tuple[str, int]], str, np.ndarray, str]:
    """``(positions, reference bases, (4, n) effects, recipe)`` of the SNV rows; effects in nats,
    ``log P(alt) - log P(ref)``-oriented (see the module docstring), NaN where not scored
    (and 0 at the reference base)."""
    snvs = [
        r for r in rows if r.get("kind") == "SNV" or (len(str(r["ref"])) == 1 and len(str(r["alt"])) == 1)
    ]
    positions = list(dict.fromkeys((str(r["chrom"]), int(r["pos"])) for r in snvs))
    col = {p: i for i, p in enumerate(positions)}
    recipe = str(snvs[0]["recipe"]) if snvs else "window"
    sign = _SIGN.get(recipe, 1.0)
    m = np.full((4, len(positions)), np.nan)
    ref = ["N"] * len(positions)
    for r in snvs:
        j = col[(str(r["chrom"]), int(r["pos"]))]
        ref[j] = str(r["ref"])
        if r["ref"] in BASES:
            m[BASES.index(str(r["ref"])), j] = 0.0
        if r["alt"] in BASES and r.get("status") == "ok" and r.get("score") is not None:
            m[BASES.index(str(r["alt"])), j] = sign * float(r["score"])
    return positions, "".join(ref), m, recipe


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: PathLike) -> None:
    ext = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
    if ext not in ("png", "svg", "pdf"):
        raise ValueError(f"{os.fspath(path)!r}: figures are written as .png, .svg or .pdf")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=ext, dpi=150)


def _xticks(ax: Any, positions: list[tuple[str, int]], ref: str) -> None:
    n = len(positions)
    if n <= 120:
        ax.set_xticks(range(n), list(ref), fontsize=max(4, min(9, 600 // max(n, 1))), family="monospace")
        ax.set_xlabel(f"reference base, {positions[0][0]}:{positions[0][1]:,}-{positions[-1][1]:,}")
    else:
        step = max(1, n // 10)
        ax.set_xticks(range(0, n, step), [f"{positions[i][1]:,}" for i in range(0, n, step)], fontsize=7)
        ax.set_xlabel(f"position on {positions[0][0]} (1-based)")


def plot_heatmap(path: PathLike, rows: Sequence[Mapping[str, Any]], *, title: str | None = None) -> None:
    """Heat-map of the SNV effects: base (A, C, G, T) x position, diverging colours centred at 0."""
    from matplotlib import colormaps
    from matplotlib.colors import TwoSlopeNorm
    from matplotlib.patches import Rectangle

    positions, ref, m, recipe = effect_matrix(rows)
    if not positions:
        raise ValueError("no SNV rows to draw")
    finite = m[np.isfinite(m)]
    span = float(np.max(np.abs(finite))) if finite.size else 1.0
    span = span or 1.0
    fig = _figure(min(18.0, 3.0 + 0.12 * len(positions)), 3.2)
    ax = fig.add_subplot()
    cmap = colormaps["RdBu"].with_extremes(bad="#bdbdbd")
    image = ax.imshow(
        np.ma.masked_invalid(m),
        aspect="auto",
        cmap=cmap,
        norm=TwoSlopeNorm(0.0, -span, span),
        interpolation="nearest",
    )
    for j, base in enumerate(ref):  # outline the reference base of each column
        if base in BASES:
            ax.add_patch(Rectangle((j - 0.5, BASES.index(base) - 0.5), 1, 1, fill=False, lw=0.6, ec="black"))
    ax.set_yticks(range(4), list(BASES))
    ax.set_ylabel("alternate base")
    _xticks(ax, positions, ref)
    label = "LL(alt) − LL(ref)" if recipe == "window" else "log P(alt) − log P(ref)"
    fig.colorbar(image, ax=ax, label=f"{label}, nats\n(< 0: alt less likely)", shrink=0.9)
    ax.set_title(title or f"In-silico saturation mutagenesis ({recipe} recipe); boxed: reference base")
    _save(fig, path)


def plot_logo(path: PathLike, rows: Sequence[Mapping[str, Any]], *, title: str | None = None) -> None:
    """Sequence-logo style importance: each reference base drawn as a letter whose height is the
    mean effect of its three substitutions, negated (how much the model prefers the reference
    base, in nats); bases the model would rather change point down."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.patches import PathPatch
    from matplotlib.textpath import TextPath
    from matplotlib.transforms import Affine2D

    positions, ref, m, recipe = effect_matrix(rows)
    if not positions:
        raise ValueError("no SNV rows to draw")
    alts = m.copy()
    for j, b in enumerate(ref):
        if b in BASES:
            alts[BASES.index(b), j] = np.nan
    counts = np.isfinite(alts).sum(axis=0)
    importance = np.full(len(positions), np.nan)
    has = counts > 0
    importance[has] = -np.nansum(alts[:, has], axis=0) / counts[has]
    fig = _figure(min(18.0, 3.0 + 0.12 * len(positions)), 3.0)
    ax = fig.add_subplot()
    font = FontProperties(family="DejaVu Sans", weight="bold")
    for j, (b, h) in enumerate(zip(ref, importance, strict=True)):
        if not np.isfinite(h) or h == 0:
            continue
        glyph = TextPath((0, 0), b, size=1, prop=font)
        box = glyph.get_extents()
        scale_x, scale_y = 0.9 / box.width, abs(h) / box.height
        flip = Affine2D().scale(scale_x, scale_y if h > 0 else -scale_y)
        moved = flip + Affine2D().translate(
            j - 0.45 - box.x0 * scale_x, -box.y0 * scale_y if h > 0 else box.y0 * scale_y
        )
        ax.add_patch(PathPatch(moved.transform_path(glyph), color=_COLOURS.get(b, "#7f7f7f"), lw=0))
    finite = importance[np.isfinite(importance)]
    top = float(np.max(np.abs(finite))) if finite.size else 1.0
    ax.set_xlim(-0.6, len(positions) - 0.4)
    ax.set_ylim(-1.1 * (top or 1.0) if (finite < 0).any() else 0, 1.1 * (top or 1.0))
    ax.axhline(0, color="black", lw=0.5)
    _xticks(ax, positions, ref)
    ax.set_ylabel("importance, nats\n(mean over the 3 SNVs)")
    ax.set_title(title or f"Per-base importance from saturation mutagenesis ({recipe} recipe)")
    _save(fig, path)
