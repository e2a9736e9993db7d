"""The hg38 reference for the ClinVar tasks: the published ``hg38.parquet`` (``ID``, ``Sequence``) or a FASTA.

The parquet (GenerTeam/variant-effect-prediction) holds one row per chromosome, ``ID`` = ``chr1``...;
only the chromosome being scored is held in memory. A FASTA (any shape
:class:`hexamer.io.reference.Reference` reads) is read region by region, upper-cased; contigs named
``chr1`` or ``1`` both work.
"""

from __future__ import annotations

from pathlib import Path

from hexamer.evals.task import DatasetSchemaError
from hexamer.io.reference import Reference

__all__ = ["REFERENCE_NAMES", "ReferenceGenome", "find_reference"]

#: names looked for next to the ClinVar files (and up to three folders above) when no hg38 is given
REFERENCE_NAMES = (
    "hg38.parquet",
    "variant-effect-prediction/hg38.parquet",
    "hg38.fa.gz",
    "hg38.fa",
    "hg38.fasta",
    "GRCh38.fa.gz",
    "GRCh38.fa",
)


def find_reference(near: Path, levels: int = 3) -> Path | None:
    """The first of :data:`REFERENCE_NAMES` in ``near`` (a folder, or a file's folder) or its parents."""
    folder = near if near.is_dir() else near.parent
    for _ in range(levels + 1):
        for name in REFERENCE_NAMES:
            if (folder / name).is_file():
                return folder / name
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


class ReferenceGenome:
    """``fetch(chrom, start, end)``: 0-based half-open slice of a chromosome (``chrom`` without ``chr``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.is_parquet = self.path.name.lower().endswith(".parquet")
        self._name: str | None = None
        self._seq = ""
        self._fasta: Reference | None = None
        if self.is_parquet:
            import pyarrow.parquet as pq

            names = pq.ParquetFile(self.path).schema_arrow.names
            if not {"ID", "Sequence"} <= set(names):
                raise DatasetSchemaError(
                    f"{self.path}: a reference parquet needs columns ID (e.g. 'chr1') and Sequence; found {', '.join(names)}"
                )
        else:
            self._fasta = Reference(self.path)

    def _contig(self, chrom: str) -> str:
        assert self._fasta is not None
        contig, message = self._fasta.resolve(str(chrom))
        if contig is None:
            raise KeyError(f"chromosome {chrom!r} is not in {self.path}: {message}")
        return contig

    def _load(self, chrom: str) -> str:
        key = f"chr{chrom}"
        if self._name != key:
            import pyarrow.parquet as pq

            table = pq.read_table(self.path, columns=["ID", "Sequence"], filters=[("ID", "=", key)])
            if table.num_rows == 0:
                raise KeyError(f"chromosome {key!r} is not in {self.path}")
            self._seq = ""  # free the previous chromosome first
            self._seq = table.column("Sequence")[0].as_py()
            self._name = key
        return self._seq

    def length(self, chrom: str) -> int:
        if self.is_parquet:
            return len(self._load(chrom))
        assert self._fasta is not None
        return self._fasta.lengths[self._contig(chrom)]

    def fetch(self, chrom: str, start: int, end: int) -> str:
        start = max(0, start)
        if self.is_parquet:
            return self._load(chrom)[start:end]
        assert self._fasta is not None
        return self._fasta.fetch(self._contig(chrom), start, end)

    def close(self) -> None:
        if self._fasta is not None:
            self._fasta.close()
        self._seq = ""
        self._name = None
