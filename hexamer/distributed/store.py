"""A run folder of committed shards: each shard's rows in its own Parquet file, written
atomically and then listed with its SHA-256 in ``shards.json`` (also written atomically), so a
killed driver loses at most the shards in flight and ``resume`` trusts only verified files.

Layout, next to the output ``NAME``: ``.NAME.hexamer-ray/meta.json`` (the job: settings, inputs
by size and SHA-256 (vep: size, mtime and sampled bytes), model fingerprint, shard size, the
command that started it), ``shards.json`` and the shard files ``shard-NNNNNN`` (Parquet rows for vep).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from hexamer.io import TableWriter, atomic_path
from hexamer.vep.checkpoint import file_sha256
from hexamer.vep.job import ResumeError, read_checkpoint_meta

__all__ = ["ShardEntry", "ShardStore", "file_identity", "run_folder"]

Row = dict[str, Any]
_META = "meta.json"
_MANIFEST = "shards.json"
#: meta.json keys that describe a run but do not make it another job
_NOT_COMPARED = ("command",)
_WRITE_ROWS = 16_384


def run_folder(output: str | os.PathLike[str]) -> Path:
    """The folder of committed shards of an output file."""
    path = Path(output)
    return path.with_name(f".{path.name}.hexamer-ray")


def file_identity(path: str | os.PathLike[str]) -> dict[str, Any]:
    """An input by content (size and SHA-256), so an edited file is another job."""
    return {"size": os.stat(path).st_size, "sha256": file_sha256(path)}


@dataclass
class ShardEntry:
    """A committed shard: its first record, how many records and rows, the contigs of its rows
    in order of first appearance, and whether it holds ``failed`` rows for a shard that kept
    failing (such a shard is computed again on resume)."""

    index: int
    first: int
    n_records: int
    n_rows: int
    sha256: str
    contigs: list[str] = field(default_factory=list)
    failed: bool = False

    @property
    def name(self) -> str:
        return f"shard-{self.index:06d}"


class ShardStore:
    """The committed shards of one job. With ``resume`` an existing folder of the same job is
    continued (a different job is refused with :class:`~hexamer.vep.job.ResumeError`); without
    it any old folder is removed."""

    def __init__(
        self,
        folder: Path,
        meta: Mapping[str, Any],
        *,
        schema: Any,
        resume: bool,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        self.folder = folder
        self.schema = schema
        self.entries: dict[int, ShardEntry] = {}
        self._note = on_note or (lambda _: None)
        compared = {k: v for k, v in meta.items() if k not in _NOT_COMPARED}
        if folder.exists() and resume:
            old = read_checkpoint_meta(folder, "run folder")
            old = old if isinstance(old, dict) else {}
            if {k: v for k, v in old.items() if k not in _NOT_COMPARED} != compared:
                changed = sorted(k for k in compared.keys() | old.keys() if old.get(k) != compared.get(k))
                changed = [k for k in changed if k not in _NOT_COMPARED]
                raise ResumeError(
                    f"{folder} was made by a different job (changed: {', '.join(changed)}); "
                    "remove it or run without resume to start over"
                )
            self.meta = old
            self._scan()
            return
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir()
        self.meta = dict(meta)
        with atomic_path(folder / _META) as tmp:
            tmp.write_text(json.dumps(self.meta, indent=1))
        self._save()

    def _save(self) -> None:
        entries = [asdict(e) for e in sorted(self.entries.values(), key=lambda e: e.index)]
        with atomic_path(self.folder / _MANIFEST) as tmp:
            tmp.write_text(json.dumps({"shards": entries}, indent=1))

    def _scan(self) -> None:
        """Keep the listed shards whose bytes still hash as recorded; delete the rest."""
        try:
            listed = json.loads((self.folder / _MANIFEST).read_text())["shards"]
            entries = [ShardEntry(**e) for e in listed]
        except FileNotFoundError:
            if any(self.folder.glob("shard-*")):  # shards that cannot be checked: said, not silent
                self._note(f"{self.folder / _MANIFEST} is missing; every shard will be computed again")
            entries = []
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._note(f"{self.folder / _MANIFEST} is unreadable ({exc}); every shard will be computed again")
            entries = []
        for entry in entries:
            path = self.folder / entry.name
            if entry.failed:
                continue  # computed again: the failure may have been the machine's
            if not path.is_file():
                self._note(f"shard file {path} is missing; its records will be computed again")
            elif file_sha256(path) != entry.sha256:
                self._note(f"shard file {path} is corrupt (its SHA-256 differs); it will be computed again")
            else:
                self.entries[entry.index] = entry
        keep = {e.name for e in self.entries.values()}
        for path in self.folder.glob("shard-*"):
            if path.name not in keep:
                path.unlink()
        self._save()

    def commit(
        self, index: int, first: int, n_records: int, rows: list[Row], *, failed: bool = False
    ) -> ShardEntry:
        """Write a shard's rows (in the order given) as Parquet with the store's schema, and record it."""
        import pyarrow as pa

        def write(path: Path) -> None:
            with TableWriter(path, schema=self.schema, format="parquet") as writer:
                it = iter(rows)
                while batch := list(islice(it, _WRITE_ROWS)):
                    writer.write_batch(pa.Table.from_pylist(batch, schema=self.schema))

        return self.commit_file(
            index, first, n_records, len(rows), write, contigs=_contigs(rows), failed=failed
        )

    def commit_file(
        self,
        index: int,
        first: int,
        n_records: int,
        n_rows: int,
        write: Callable[[Path], None],
        *,
        contigs: list[str] | None = None,
        failed: bool = False,
    ) -> ShardEntry:
        """Commit a shard whose file ``write(path)`` writes (atomically: to a temp name first)."""
        entry = ShardEntry(index, first, n_records, n_rows, "", contigs or [], failed)
        path = self.folder / entry.name
        with atomic_path(path) as tmp:
            write(tmp)
        entry.sha256 = file_sha256(path)
        self.entries[index] = entry
        self._save()
        return entry

    def path(self, index: int) -> Path:
        """The file of committed shard ``index``."""
        return self.folder / self.entries[index].name

    def rows(self, columns: Iterable[str]) -> Iterator[Row]:
        """Every committed row, shard by shard in input order, read lazily."""
        import pyarrow.parquet as pq

        names = list(columns)
        for index in sorted(self.entries):
            with pq.ParquetFile(self.folder / self.entries[index].name) as pf:
                for batch in pf.iter_batches(batch_size=_WRITE_ROWS, columns=names):
                    yield from batch.to_pylist()

    def contigs(self) -> list[str]:
        """The rows' chromosomes in the order of the first record naming each."""
        seen: dict[str, None] = {}
        for index in sorted(self.entries):
            seen.update(dict.fromkeys(self.entries[index].contigs))
        return list(seen)

    def check_complete(self, n_records: int) -> None:
        """Fail loudly (never write an output with a hole) unless the shards cover every record."""
        at = 0
        for index in sorted(self.entries):
            entry = self.entries[index]
            if entry.first != at:
                raise RuntimeError(
                    f"{self.folder}: shard {index} starts at record {entry.first}, expected {at}"
                )
            at += entry.n_records
        if at != n_records:
            raise RuntimeError(f"{self.folder}: the shards hold {at} records, the input {n_records}")

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _contigs(rows: Iterable[Row]) -> list[str]:
    """Chromosomes of rows sorted by record, in order of first appearance (empty names left out)."""
    return list(dict.fromkeys(r["chrom"] for r in rows if r.get("chrom")))
