"""Reading tracks back for the tests: bigWig through pyBigWig, bedGraph as text."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np


def bigwig_values(path: Path, contig: str, start: int, end: int) -> np.ndarray:
    import pyBigWig

    bw = pyBigWig.open(str(path))
    try:
        return np.asarray(bw.values(contig, start, end), dtype=np.float32)
    finally:
        bw.close()


def bedgraph_values(path: Path, contig: str, start: int, end: int) -> np.ndarray:
    """Per-base values of ``[start, end)`` from a bedGraph (plain or gzip/BGZF), NaN where absent."""
    out = np.full(end - start, np.nan, dtype=np.float32)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        first = f.readline()
        assert first.startswith("track type=bedGraph")
        for line in f:
            chrom, a, b, value = line.rstrip("\n").split("\t")
            if chrom != contig:
                continue
            a, b = max(int(a), start), min(int(b), end)
            if a < b:
                assert np.isnan(out[a - start : b - start]).all(), "a base written twice"
                out[a - start : b - start] = np.float32(float(value))
    return out
