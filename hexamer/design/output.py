"""Writing designed candidates: FASTA, or a table (TSV, CSV, Parquet; Parquet also holds the per-base
log-probabilities), atomically, by the output's extension."""

from __future__ import annotations

import os
from pathlib import Path

from hexamer.design.api import Candidate
from hexamer.io.writers import table_format, write_fasta, write_table

__all__ = ["check_output", "write_candidates"]

_FASTA = (".fa", ".fasta", ".fna")


def check_output(path: str | os.PathLike[str]) -> None:
    """Refuse an output name whose format is unknown (before any model work)."""
    name = os.fspath(path).lower()
    if not name.endswith(_FASTA):
        table_format(path)


def write_candidates(path: str | os.PathLike[str], candidates: list[Candidate]) -> None:
    """FASTA (header: id, log-likelihood, GC, pass) or a table, one row per candidate."""
    name = os.fspath(path).lower()
    if name.endswith(_FASTA):
        records = [
            (
                f"design_{i + 1}",
                c.sequence,
                f"log_likelihood={c.log_likelihood:.4f} gc={c.gc:.4f} pass={c.passed}",
            )
            for i, c in enumerate(candidates)
        ]
        write_fasta(Path(path), records)
        return
    per_base = table_format(path) == "parquet"
    write_table(path, [c.row(f"design_{i + 1}", per_base) for i, c in enumerate(candidates)])
