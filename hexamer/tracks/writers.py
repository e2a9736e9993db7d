"""Streaming, atomic bigWig and bedGraph writers for per-base tracks.

Both take blocks of per-base values in genome order (``write(contig, start, values)``, NaN =
absent) and write only the scored bases: a NaN is a gap in the file, never a zero. Files are
written to a temporary name beside the target and renamed on :meth:`commit`, so a killed run
leaves no half-written track.

* **bigWig** (``pyBigWig``, extra ``tracks``): the header lists every contig of the FASTA index
  with its length; each run of scored bases is one ``addEntries`` call with ``span=1, step=1``.
  Values are float32 (bigWig's type).
* **bedGraph**: ``contig  start  end  value`` (0-based, end exclusive), adjacent bases of equal
  value merged into one line, values printed with 9 significant digits (float32 round-trips, so a
  bedGraph reads back equal to the bigWig); ``.bedGraph.gz`` is BGZF (``bgzip``'s format).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from hexamer.io.writers import AtomicTarget

__all__ = ["FORMATS", "BedGraphWriter", "BigWigWriter", "MissingDependencyError", "runs", "track_writer"]

#: format name -> file suffix
FORMATS = {"bigwig": ".bw", "bedgraph": ".bedGraph", "bedgraph.gz": ".bedGraph.gz"}


class MissingDependencyError(ImportError):
    """An optional dependency is not installed; the message gives the pip command."""


def import_pybigwig() -> Any:
    try:
        import pyBigWig
    except ImportError as exc:
        raise MissingDependencyError(
            "bigWig output needs pyBigWig: pip install 'hexamer[tracks]' "
            "(or write --format bedgraph, which needs nothing more)"
        ) from exc
    return pyBigWig


def runs(values: np.ndarray) -> list[tuple[int, int]]:
    """``[a, b)`` index ranges of the runs of non-NaN values."""
    finite = ~np.isnan(values)
    edges = np.flatnonzero(np.diff(np.concatenate([[False], finite, [False]]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


class _AtomicTrack:
    """What both writers share: ``_file`` is open on a temporary name beside ``path`` and is
    renamed into place by :meth:`commit` (or removed by :meth:`discard`)."""

    _file: Any

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._target = AtomicTarget(self.path)
        self.n_written = 0

    def commit(self) -> None:
        self._file.close()
        self._target.commit()

    def discard(self) -> None:
        self._file.close()
        self._target.discard()


class BigWigWriter(_AtomicTrack):
    """Per-base values into a bigWig; blocks must come in header (FASTA) order, then by start."""

    def __init__(self, path: str | os.PathLike[str], contigs: Mapping[str, int]) -> None:
        pybw = import_pybigwig()
        super().__init__(path)
        self._file = pybw.open(str(self._target.tmp), "w")
        if self._file is None:
            raise OSError(f"{self.path}: pyBigWig could not open the file for writing")
        self._file.addHeader([(name, int(n)) for name, n in contigs.items() if n > 0], maxZooms=10)

    def write(self, contig: str, start: int, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        for a, b in runs(values):
            self._file.addEntries(contig, int(start + a), values=values[a:b], span=1, step=1)
            self.n_written += b - a


class BedGraphWriter(_AtomicTrack):
    """Per-base values into a bedGraph (plain, or BGZF when the name ends in ``.gz``)."""

    _file: IO[bytes]

    def __init__(self, path: str | os.PathLike[str], *, name: str, description: str) -> None:
        super().__init__(path)
        if self.path.name.endswith(".gz"):
            import pysam

            self._file = pysam.BGZFile(str(self._target.tmp), "wb")  # type: ignore[assignment]
        else:
            self._file = open(self._target.tmp, "wb")  # noqa: SIM115  (closed in commit/discard)
        self._file.write(f'track type=bedGraph name="{name}" description="{description}"\n'.encode())

    def write(self, contig: str, start: int, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float32)
        lines = []
        for a, b in runs(values):
            run = values[a:b]
            cut = np.flatnonzero(run[1:] != run[:-1]) + 1
            starts = np.concatenate([[0], cut])
            ends = np.concatenate([cut, [len(run)]])
            base = start + a
            lines.extend(
                f"{contig}\t{base + s}\t{base + e}\t{v:.9g}\n"
                for s, e, v in zip(starts.tolist(), ends.tolist(), run[starts].tolist(), strict=True)
            )
            self.n_written += b - a
        if lines:
            self._file.write("".join(lines).encode())


def track_writer(
    fmt: str, path: str | os.PathLike[str], *, contigs: Mapping[str, int], name: str, description: str
) -> BigWigWriter | BedGraphWriter:
    """A writer for one of :data:`FORMATS`."""
    if fmt == "bigwig":
        return BigWigWriter(path, contigs)
    if fmt in ("bedgraph", "bedgraph.gz"):
        return BedGraphWriter(path, name=name, description=description)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
