"""Read back a table hexamer wrote (``hexamer score``/``vep`` output: Parquet, TSV, CSV, JSON
Lines), from a file or from standard input (``-``, with its format named)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from hexamer.io.stdio import STDIO, spool_stdin
from hexamer.io.writers import table_format

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["read_table"]


def read_table(path: str | os.PathLike[str], format: str | None = None) -> pa.Table:
    """The table at ``path``, its format named by ``format`` or by the extension (``.parquet``,
    ``.tsv``, ``.csv``, ``.jsonl``). ``-`` reads standard input and needs ``format`` (a stream has
    no extension); it is spooled to a temporary file first (Parquet is read from its end)."""
    if os.fspath(path) == STDIO:
        if format is None:
            raise ValueError(
                "reading a table from standard input ('-') needs its format (parquet, tsv, csv, jsonl)"
            )
        fmt = table_format("", format)
        with tempfile.TemporaryDirectory(prefix="hexamer-table-") as tmp:
            spooled = Path(tmp) / f"stdin.{fmt}"
            spool_stdin(spooled)
            return _read(spooled, fmt)
    return _read(Path(path), table_format(path, format))


def _read(path: Path, fmt: str) -> pa.Table:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if fmt == "jsonl":
        import pyarrow.json as pajson

        return pajson.read_json(path)
    import pyarrow.csv as pacsv

    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t" if fmt == "tsv" else ","))
