"""Where a batch job over sequences writes its rows: a FASTA of the good records (sample ``j`` of a
record named ``ID_j``), or a table of every record with its ``status`` and ``error``; FASTA on
standard output when no path is given. Files are written atomically (a table through
:class:`~hexamer.io.TableWriter`, a FASTA at the end), so a killed job leaves no half file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.io import TableWriter

__all__ = ["FASTA_SUFFIXES", "JobOutput", "check_sequence_output", "check_table_output", "is_fasta_name"]

FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fa.gz", ".fasta.gz")


def is_fasta_name(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a FASTA file (by its extension)."""
    return Path(path).name.lower().endswith(FASTA_SUFFIXES)


def check_sequence_output(path: str | os.PathLike[str]) -> None:
    """An output of sequences (``hexamer generate``): FASTA or a table, by extension; a
    ``ValueError`` naming the supported ones otherwise."""
    if not is_fasta_name(path):
        from hexamer.io import table_format

        table_format(path)


def check_table_output(path: str | os.PathLike[str]) -> None:
    """An output of numbers (``hexamer score``): a table, never FASTA."""
    from hexamer.io import table_format

    if is_fasta_name(path):
        raise ValueError("scores are a table: use .tsv, .csv, .jsonl or .parquet")
    table_format(path)


class JobOutput:
    """FASTA (good records only) or a table (every record, with status) at ``path``; standard
    output FASTA when ``path`` is None."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        from hexamer.io import TableWriter

        self.path = None if path is None else Path(path)
        self.fasta: list[tuple[str, str, str]] = []
        self.table: TableWriter | None = None
        self.is_fasta = self.path is None or is_fasta_name(self.path)
        if self.path is not None and not self.is_fasta:
            self.table = TableWriter(self.path)

    def add(self, rows: list[dict[str, Any]], fasta_key: str | None) -> None:
        """A batch of rows: all of them into a table, the ``ok`` ones' ``fasta_key`` into a FASTA."""
        if self.table is not None:
            self.table.write_batch(rows)
        elif fasta_key is not None:  # sample j of a record (--n) is named ID_j
            self.fasta.extend(
                (r["id"] if "sample" not in r else f"{r['id']}_{r['sample']}", r[fasta_key], "")
                for r in rows
                if r["status"] == "ok"
            )

    def close(self) -> None:
        """Finish the file (or print the FASTA)."""
        from hexamer.io import write_fasta

        if self.table is not None:
            self.table.close()
        elif self.path is not None:
            write_fasta(self.path, self.fasta)
        else:
            for ident, seq, desc in self.fasta:
                print(f">{ident}{' ' + desc if desc else ''}\n{seq}")

    def abort(self) -> None:
        """Drop what was written (nothing appears at ``path``)."""
        if self.table is not None:
            self.table.abort()
