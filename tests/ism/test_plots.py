"""ISM figures are written (PNG/SVG), with the matrix the heat-map draws checked."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.ism import plot_heatmap, plot_logo
from hexamer.ism.plots import effect_matrix


def rows(recipe: str = "window") -> list[dict]:
    out = []
    for pos, ref in ((10, "A"), (11, "N"), (12, "G")):
        for alt in "ACGT":
            if alt == ref:
                continue
            ok = ref != "N"
            out.append(
                {
                    "chrom": "c",
                    "pos": pos,
                    "ref": ref,
                    "alt": alt,
                    "kind": "SNV",
                    "recipe": recipe,
                    "score": -0.5 if ok else None,
                    "status": "ok" if ok else "skipped",
                }
            )
    return out


def test_effect_matrix_orientation_and_gaps() -> None:
    _, ref, m, _ = effect_matrix(rows())
    assert ref == "ANG"
    assert m[0, 0] == 0.0 and m[1, 0] == -0.5  # reference cell 0, window score as is
    assert np.isnan(m[:, 1]).all()  # N: nothing scored
    _, _, m2, _ = effect_matrix(rows("next_base"))
    assert m2[1, 0] == 0.5  # next_base log P(ref) - log P(alt) is negated: < 0 = alt less likely


@pytest.mark.parametrize("draw", [plot_heatmap, plot_logo])
@pytest.mark.parametrize("ext", ["png", "svg"])
def test_figures_written(tmp_path, draw, ext) -> None:
    path = tmp_path / f"fig.{ext}"
    draw(path, rows())
    assert path.stat().st_size > 1000
    with pytest.raises(ValueError, match="png"):
        draw(tmp_path / "fig.txt", rows())
    with pytest.raises(ValueError, match="no SNV"):
        draw(path, [])
