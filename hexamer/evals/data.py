"""Reading the public datasets' files: Parquet, Arrow, CSV/TSV, JSON lines, or a cached Hub dataset.

Every task reads its rows through :func:`read_rows`, which checks the columns first (a file that
does not match raises :class:`~hexamer.evals.task.DatasetSchemaError` listing what the task
expects) and takes the ``--limit`` subset the way the published scripts do: ``pandas``'
``df.sample(n, random_state=seed)`` is ``numpy.random.RandomState(seed).choice(n, n_rows,
replace=False)``, so the same rows come out, in the same order, and a larger limit keeps every row of
a smaller one (so its cached records are reused). For Parquet only the row groups holding the
sampled rows are read, which matters for the 1.3 GB sequence-recovery file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hexamer.evals.task import DatasetSchemaError

__all__ = [
    "ROW_INDEX",
    "TABLE_SUFFIXES",
    "find_file",
    "materialize",
    "read_rows",
    "row_hash",
    "sample_indices",
    "schema_error",
    "table_columns",
    "variant_example",
]

#: key of the original 0-based row number in every row :func:`read_rows` returns
ROW_INDEX = "_row"
TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc", ".csv", ".tsv", ".jsonl", ".json")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for gz in (".gz", ".bz2"):
        if name.endswith(gz):
            name = name[: -len(gz)]
    return os.path.splitext(name)[1]


def sample_indices(n_rows: int, limit: int | None, seed: int = 0) -> np.ndarray:
    """Row numbers of the ``limit`` subset: all rows in order, or ``df.sample(limit, random_state=seed)``'s."""
    if limit is None or limit >= n_rows:
        return np.arange(n_rows)
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    return np.random.RandomState(seed).choice(n_rows, size=limit, replace=False)


def row_hash(*parts: Any) -> str:
    """16 hex characters of MD5 over ``"_".join(parts)`` (the published scripts' row id)."""
    return hashlib.md5("_".join(str(p) for p in parts).encode()).hexdigest()[:16]


def find_file(data: Path, candidates: Sequence[str], what: str) -> Path:
    """``data`` itself when it is a file, else the first of ``candidates`` that exists under it."""
    if data.is_file():
        return data
    if not data.exists():
        raise FileNotFoundError(f"{what}: {data} does not exist")
    for rel in candidates:
        if (data / rel).is_file():
            return data / rel
    tried = ", ".join(str(data / c) for c in candidates)
    raise FileNotFoundError(f"{what}: no data file under {data} (looked for {tried})")


def materialize(
    data: str | os.PathLike[str],
    *,
    export_dir: Path | None = None,
    config: str | None = None,
    split: str = "test",
) -> Path:
    """A local path for ``data``: a path as is; ``hf://datasets/ORG/NAME/FILE`` fetched through
    ``huggingface_hub`` (served from its cache when present, so offline reruns work); or a Hub
    dataset id ``ORG/NAME`` loaded with ``datasets`` (optional, when installed; ``config``/``split``)
    and exported once to a Parquet file under ``export_dir``."""
    text = os.fspath(data)
    if not text.startswith("hf://"):
        path = Path(text)
        if path.exists() or text.count("/") != 1 or text.startswith((".", "/")):
            return path
        return _from_datasets(text, config, split, export_dir or Path.cwd())
    rest = text.removeprefix("hf://")
    kind, _, rest = rest.partition("/")
    if kind != "datasets" or rest.count("/") < 2:
        raise ValueError(f"{text}: expected hf://datasets/ORG/NAME/path/to/file")
    org, name, filename = rest.split("/", 2)
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(f"{org}/{name}", filename, repo_type="dataset"))


def _from_datasets(name: str, config: str | None, split: str, export_dir: Path) -> Path:
    try:
        import datasets
    except ImportError:
        raise FileNotFoundError(
            f"{name} is not a local path, and reading Hub dataset ids needs the optional `datasets` package "
            "(pip install datasets), or download the files and pass their path"
        ) from None
    out = export_dir / f"{name.replace('/', '__')}__{config or 'default'}__{split}.parquet"
    if not out.exists():
        ds = datasets.load_dataset(name, config, split=split)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        ds.to_parquet(str(tmp))
        os.replace(tmp, out)
    return out


def _open_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        try:
            return pa.ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            pass
    with pa.memory_map(str(path)) as source:  # Hugging Face `datasets` caches use the stream format
        return pa.ipc.open_stream(source).read_all()


def _read_full(path: Path) -> pa.Table:
    suffix = _suffix(path)
    if suffix in (".arrow", ".feather", ".ipc"):
        return _open_arrow(path)
    if suffix in (".csv", ".tsv"):
        from pyarrow import csv

        opts = csv.ParseOptions(delimiter="\t" if suffix == ".tsv" else ",")
        return csv.read_csv(path, parse_options=opts)
    if suffix in (".jsonl", ".json"):
        from pyarrow import json as pa_json

        return pa_json.read_json(path)
    raise ValueError(f"{path}: unsupported table format {suffix!r} (use one of {', '.join(TABLE_SUFFIXES)})")


def table_columns(path: Path) -> list[str]:
    """Column names (Parquet: from the footer, without reading the data)."""
    if _suffix(path) == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.ParquetFile(path).schema_arrow.names)
    return list(_read_full(path).column_names)


def schema_error(
    path: Path, missing: Iterable[str], found: Sequence[str], expected: Mapping[str, str]
) -> DatasetSchemaError:
    """The error for a table at ``path`` that lacks the ``missing`` columns: it names them, lists
    every ``expected`` column with what it holds, and the columns ``found``."""
    lines = [f"{path}: missing column(s) {', '.join(sorted(missing))}; expected columns:"]
    lines += [f"  {name}: {desc}" for name, desc in expected.items()]
    lines.append(f"found: {', '.join(found) if found else '(none)'}")
    return DatasetSchemaError("\n".join(lines))


def _columns_to_read(
    path: Path,
    names: Sequence[str],
    required: Sequence[str],
    optional: Sequence[str],
    expected: Mapping[str, str],
) -> list[str]:
    """The ``required`` columns and the ``optional`` ones among ``names``; raises :func:`schema_error`
    when a required one is not there."""
    missing = set(required) - set(names)
    if missing:
        raise schema_error(path, missing, names, expected)
    return [c for c in dict.fromkeys([*required, *optional]) if c in names]


def variant_example(row: Mapping[str, Any], *, chrom: str) -> dict[str, Any]:
    """The fields a variant task's example starts with, from a :func:`read_rows` row with ``chrom``,
    ``pos``, ``ref`` and ``alt``: a unique id ``row:chrom:pos:ref>alt``, the row number and the
    variant (``chrom`` as the task spells it)."""
    return {
        "id": f"{row[ROW_INDEX]}:{row['chrom']}:{row['pos']}:{row['ref']}>{row['alt']}",
        "row": row[ROW_INDEX],
        "chrom": chrom,
        "pos": row["pos"],
        "ref": row["ref"],
        "alt": row["alt"],
    }


def read_rows(
    path: Path,
    *,
    required: Sequence[str],
    optional: Sequence[str] = (),
    expected: Mapping[str, str] | None = None,
    limit: int | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Rows of a table as dicts (the ``required`` columns plus whichever ``optional`` ones exist),
    each with its original row number under :data:`ROW_INDEX`, in ``--limit`` sample order."""
    path = Path(path)
    suffix = _suffix(path)
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: unsupported table format (use one of {', '.join(TABLE_SUFFIXES)})")
    expected = expected if expected is not None else {c: "" for c in required}
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        columns = _columns_to_read(path, list(pf.schema_arrow.names), required, optional, expected)
        n = pf.metadata.num_rows
        index = sample_indices(n, limit, seed)
        if len(index) == n:
            table = pf.read(columns=columns)
            rows_at = index
        else:
            starts = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)])
            groups = sorted(set(np.searchsorted(starts, index, side="right") - 1))
            table = pf.read_row_groups(groups, columns=columns)
            offset = {g: int(sum(starts[h + 1] - starts[h] for h in groups if h < g)) for g in groups}
            group_of = np.searchsorted(starts, index, side="right") - 1
            rows_at = np.array([offset[g] + i - starts[g] for g, i in zip(group_of, index, strict=True)])
    else:
        table = _read_full(path)
        columns = _columns_to_read(path, list(table.column_names), required, optional, expected)
        table = table.select(columns)
        index = sample_indices(table.num_rows, limit, seed)
        rows_at = index
    picked = table.take(pa.array(rows_at, type=pa.int64())).to_pylist()
    for row, original in zip(picked, index.tolist(), strict=True):
        row[ROW_INDEX] = original
    return picked
