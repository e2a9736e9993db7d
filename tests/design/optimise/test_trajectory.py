"""Trajectory rows and the figure (a real PNG; a bad extension refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.design.optimise import MotifCountOracle, Objective, evolve, plot_trajectory


def test_rows_and_plot(tmp_path: Path) -> None:
    result = evolve("ATATATATAT", Objective(MotifCountOracle("GC")), rounds=3)
    rows = result.rows()
    assert rows[0]["step"] == 0 and rows[0]["edits"] == "" and rows[0]["likelihood"] is None
    assert rows[-1]["n_edits"] == len(result.edits)
    plot_trajectory(tmp_path / "t.png", result.trajectory, title="GC sites")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="figures"):
        plot_trajectory(tmp_path / "t.jpg", result.trajectory)
    with pytest.raises(ValueError, match="empty"):
        plot_trajectory(tmp_path / "e.png", [])
