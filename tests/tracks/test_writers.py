"""bigWig and bedGraph writers: absent bases stay absent, bedGraph equals bigWig, atomic files,
and a clear error without pyBigWig."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hexamer.tracks import BedGraphWriter, BigWigWriter, MissingDependencyError
from hexamer.tracks.writers import runs, track_writer
from tests.tracks.helpers import bedgraph_values, bigwig_values

CONTIGS = {"a": 100, "b": 40}


def _values() -> np.ndarray:
    v = np.linspace(-3, -0.5, 30).astype(np.float32)
    v[5:9] = np.nan
    v[20:23] = v[19]  # equal neighbours: merged into one bedGraph line
    v[-1] = np.nan
    return v


def test_runs() -> None:
    assert runs(np.array([np.nan, 1, 2, np.nan, 3], dtype=np.float32)) == [(1, 3), (4, 5)]
    assert runs(np.array([np.nan, np.nan])) == []


@pytest.mark.parametrize("suffix", [".bedGraph", ".bedGraph.gz"])
def test_bigwig_and_bedgraph_hold_the_same_values_and_gaps(tmp_path: Path, suffix: str) -> None:
    v = _values()
    bw = BigWigWriter(tmp_path / "t.bw", CONTIGS)
    bg = BedGraphWriter(tmp_path / f"t{suffix}", name="t", description="test")
    for w in (bw, bg):
        w.write("a", 10, v)
        w.write("b", 0, v[:12])
        w.commit()
    assert bw.n_written == bg.n_written == int((~np.isnan(v)).sum() + (~np.isnan(v[:12])).sum())
    got = bigwig_values(tmp_path / "t.bw", "a", 0, 100)
    assert np.isnan(got[:10]).all() and np.isnan(got[40:]).all()
    np.testing.assert_array_equal(got[10:40], v)  # NaN where absent: not zero
    np.testing.assert_array_equal(bedgraph_values(tmp_path / f"t{suffix}", "a", 0, 100), got)
    np.testing.assert_array_equal(
        bedgraph_values(tmp_path / f"t{suffix}", "b", 0, 40), bigwig_values(tmp_path / "t.bw", "b", 0, 40)
    )
    import pyBigWig

    handle = pyBigWig.open(str(tmp_path / "t.bw"))
    assert handle.chroms() == CONTIGS  # sizes from the FASTA index
    handle.close()


def test_bedgraph_merges_equal_neighbours(tmp_path: Path) -> None:
    w = BedGraphWriter(tmp_path / "t.bedGraph", name="t", description="d")
    w.write("a", 0, np.array([1, 1, 1, 2, np.nan, 2], dtype=np.float32))
    w.commit()
    lines = (tmp_path / "t.bedGraph").read_text().splitlines()[1:]
    assert lines == ["a\t0\t3\t1", "a\t3\t4\t2", "a\t5\t6\t2"]


def test_nothing_is_left_when_discarded(tmp_path: Path) -> None:
    for w in (
        BigWigWriter(tmp_path / "t.bw", CONTIGS),
        BedGraphWriter(tmp_path / "t.bedGraph", name="t", description="d"),
    ):
        w.write("a", 0, _values())
        w.discard()
    assert list(tmp_path.iterdir()) == []


def test_missing_pybigwig_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyBigWig", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'hexamer\[tracks\]'"):
        track_writer("bigwig", tmp_path / "t.bw", contigs=CONTIGS, name="t", description="d")
    w = track_writer("bedgraph", tmp_path / "t.bedGraph", contigs=CONTIGS, name="t", description="d")
    w.write("a", 0, _values())
    w.commit()  # bedGraph still works
    assert (tmp_path / "t.bedGraph").is_file()
