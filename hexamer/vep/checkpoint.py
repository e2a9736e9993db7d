"""The checkpoint store of a resumable VEP job: sorted Parquet chunks of finished rows, each
listed with its SHA-256 in ``chunks.json`` once written, merged :data:`CHUNK_FANIN` at a time, and
read back as one sorted stream (see :mod:`hexamer.vep.job` for the whole protocol)."""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.io import TableWriter, atomic_path
from hexamer.vep.rows import Key, Row, row_schema
from hexamer.vep.settings import ROW_COLUMNS

__all__ = [
    "CHUNK_FANIN",
    "Chunk",
    "ChunkStore",
    "DoneKeys",
    "chunk_name",
    "file_sha256",
    "input_identity",
    "merged_rows",
    "row_key",
]

PathLike = str | os.PathLike[str]
_MANIFEST = "chunks.json"
_CHUNK_NAME = re.compile(r"^rows-(\d+)(?:-(\d+))?\.parquet$")
#: This many consecutive checkpoint chunks of the same span are merged into one.
CHUNK_FANIN = 16
#: The final merge reads at most this many chunks at once (more only after unusual histories).
_MAX_MERGE = 64
#: Rows read at a time, shared out among the chunks being merged.
_READ_ROWS = 16_384
#: Rows per batch (Parquet row group) written to a chunk.
_WRITE_ROWS = 16_384


def file_sha256(path: PathLike) -> str:
    """SHA-256 of a file's bytes, streamed (about 1.5 GB/s on one core)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


#: bytes of an input read for its identity: the first and last MiB and :data:`SAMPLES` blocks between
SAMPLE_EDGE = 1 << 20
SAMPLES = 256
SAMPLE_BLOCK = 4096


def input_identity(path: PathLike) -> dict[str, Any]:
    """An input file as a job knows it, without reading it through: its size, its mtime (ns), the
    SHA-256 of a sample of its bytes (the first and last MiB and :data:`SAMPLES` evenly spaced
    4 KiB blocks: the whole file up to 2 MiB and a bit). An edit changes the mtime, or the size, or
    the bytes sampled; only an edit of unsampled bytes that keeps both the size and the mtime goes
    unseen. A copy of the file (``cp`` without ``-p``) has another mtime: it is another input."""
    size = os.stat(path).st_size
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= 2 * SAMPLE_EDGE + SAMPLES * SAMPLE_BLOCK:
            digest.update(f.read())
        else:
            offsets = [0] + [
                SAMPLE_EDGE + i * (size - 2 * SAMPLE_EDGE - SAMPLE_BLOCK) // (SAMPLES - 1)
                for i in range(SAMPLES)
            ]
            for offset in offsets:
                f.seek(offset)
                digest.update(f.read(SAMPLE_EDGE if offset == 0 else SAMPLE_BLOCK))
            f.seek(size - SAMPLE_EDGE)
            digest.update(f.read(SAMPLE_EDGE))
    return {"size": size, "mtime_ns": os.stat(path).st_mtime_ns, "sample_sha256": digest.hexdigest()}


def row_key(row: Mapping[str, Any]) -> Key:
    return row["record"], row["alt_index"]


class DoneKeys(Mapping[Key, Row]):
    """The keys ``(record, alt_index)`` of checkpointed rows, in about one byte per record: a
    bitmask of ALT indices 0-7 per record, and a set for higher ones.

    The engine asks ``key in done`` and, for a unit whose keys are all in, ``done[key]``; those rows
    are already in a chunk (the resume loop drops them), so the value is a stub holding the key.
    """

    _BITS = 8

    def __init__(self) -> None:
        self._mask = np.zeros(0, dtype=np.uint8)
        self._view: memoryview | None = None
        self._extra: set[Key] = set()
        self._n = 0

    def add(self, records: np.ndarray, alts: np.ndarray) -> None:
        records = np.asarray(records, dtype=np.int64)
        alts = np.asarray(alts, dtype=np.int64)
        if records.size == 0:
            return
        if int(records.min()) < 0 or int(alts.min()) < 0:
            raise ValueError("negative record or ALT index in a checkpoint chunk")
        top = int(records.max()) + 1
        if top > len(self._mask):
            grown = np.zeros(max(top, len(self._mask) * 3 // 2), dtype=np.uint8)
            grown[: len(self._mask)] = self._mask
            self._mask = grown
        self._view = None
        small = alts < self._BITS
        for a in np.unique(alts[small]).tolist():
            rec = np.unique(records[small & (alts == a)])
            bit = np.uint8(1 << a)
            self._n += int(np.count_nonzero((self._mask[rec] & bit) == 0))
            self._mask[rec] |= bit
        for key in zip(records[~small].tolist(), alts[~small].tolist(), strict=True):
            if key not in self._extra:
                self._extra.add(key)
                self._n += 1

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        record, alt = key
        if 0 <= alt < self._BITS:
            if self._view is None:
                self._view = memoryview(self._mask)
            return 0 <= record < len(self._view) and bool(self._view[record] >> alt & 1)
        return key in self._extra

    def __getitem__(self, key: Key) -> Row:
        if key not in self:
            raise KeyError(key)
        return {"record": key[0], "alt_index": key[1]}

    def __iter__(self) -> Iterator[Key]:
        for record in np.flatnonzero(self._mask).tolist():
            bits = int(self._mask[record])
            yield from ((record, a) for a in range(self._BITS) if bits >> a & 1)
        yield from sorted(self._extra)

    def __len__(self) -> int:
        return self._n


@dataclass(frozen=True)
class Chunk:
    """A sorted chunk holding the rows of checkpoints ``first`` to ``last`` (merged when several)."""

    first: int
    last: int
    path: Path

    @property
    def span(self) -> int:
        return self.last - self.first + 1


def chunk_name(first: int, last: int) -> str:
    return f"rows-{first:06d}.parquet" if first == last else f"rows-{first:06d}-{last:06d}.parquet"


def _write_chunk(path: Path, rows: Iterable[Row], extra: Sequence[str] = ()) -> None:
    """Write rows (plain values, in the order given) to a Parquet chunk, atomically."""
    import pyarrow as pa

    schema = row_schema(extra)
    it = iter(rows)
    with TableWriter(path, schema=schema) as writer:
        while batch := list(islice(it, _WRITE_ROWS)):
            writer.write_batch(pa.Table.from_pylist(batch, schema=schema))


def _read_rows(path: Path, batch_rows: int, extra: Sequence[str] = ()) -> Iterator[Row]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=[*ROW_COLUMNS, *extra]):
            yield from batch.to_pylist()


def merged_rows(paths: Sequence[Path], extra: Sequence[str] = ()) -> Iterator[Row]:
    """The rows of sorted chunks as one sorted stream, read lazily (a key met twice is kept once);
    ``extra`` columns are read beside :data:`ROW_COLUMNS`."""
    batch_rows = max(256, _READ_ROWS // max(1, len(paths)))
    last: Key | None = None
    for row in heapq.merge(*(_read_rows(p, batch_rows, extra) for p in paths), key=row_key):
        key = row_key(row)
        if key != last:
            last = key
            yield row


def _keys_sorted(records: np.ndarray, alts: np.ndarray, before: Key | None) -> bool:
    if before is not None and records.size:
        records = np.concatenate([[before[0]], records])
        alts = np.concatenate([[before[1]], alts])
    d_rec, d_alt = np.diff(records), np.diff(alts)
    return bool(np.all((d_rec > 0) | ((d_rec == 0) & (d_alt >= 0))))


class ChunkStore:
    """The sidecar's row chunks: each written sorted by ``(record, alt_index)``; every
    :data:`CHUNK_FANIN` consecutive chunks of one span are merged into one (so N checkpoints leave
    O(log N) chunks), and the final output is a k-way merge of them all.

    A chunk counts once ``chunks.json`` lists it with the SHA-256 of its bytes (written after the
    chunk itself, atomically); :meth:`scan` drops chunks it does not list or whose bytes changed.
    """

    def __init__(
        self, side: Path, on_note: Callable[[str], None] | None = None, extra_columns: Sequence[str] = ()
    ) -> None:
        self.side = side
        #: float64 columns the rows carry beyond ROW_COLUMNS (a fine-tuned head's effects)
        self.extra_columns = tuple(extra_columns)
        self.chunks: list[Chunk] = []
        self.hashes: dict[str, str] = {}
        self._note = on_note or (lambda _: None)

    def save_manifest(self) -> None:
        """Record the committed chunks and their hashes (atomically)."""
        with atomic_path(self.side / _MANIFEST) as tmp:
            tmp.write_text(json.dumps({"sha256": self.hashes}, indent=1, sort_keys=True))

    def _read_manifest(self) -> dict[str, str]:
        path = self.side / _MANIFEST
        try:
            recorded = json.loads(path.read_text())["sha256"]
            if not isinstance(recorded, dict):
                raise TypeError("not an object")
            return {str(k): str(v) for k, v in recorded.items()}
        except FileNotFoundError:
            if any(_CHUNK_NAME.match(p.name) for p in self.side.glob("rows-*.parquet")):
                # the chunks cannot be checked without their hashes: said, like an unreadable one
                self._note(f"{path} is missing; every checkpointed row will be computed again")
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._note(f"{path} is unreadable ({exc}); every checkpointed row will be computed again")
            return {}

    def _store(self, path: Path, rows: Iterable[Row]) -> None:
        """Write a chunk and note its hash (committed by the next :meth:`save_manifest`)."""
        _write_chunk(path, rows, self.extra_columns)
        self.hashes[path.name] = file_sha256(path)

    def scan(self) -> None:
        """Find the chunks of an earlier run and check them against ``chunks.json``: a chunk it
        does not list (killed before it was recorded) is deleted, one whose bytes changed is
        deleted with a note (its rows are computed again). A chunk inside a merged one (the merge
        was killed before it removed its inputs) is deleted; chunks of an older version are sorted."""
        recorded = self._read_manifest()
        found: list[Chunk] = []
        seen: set[str] = set()
        for path in self.side.glob("rows-*.parquet"):
            m = _CHUNK_NAME.match(path.name)
            if m is None:
                continue
            seen.add(path.name)
            want = recorded.get(path.name)
            if want is None:
                path.unlink()
                continue
            if file_sha256(path) != want:
                self._note(
                    f"checkpoint chunk {path} is corrupt (its SHA-256 differs from the one recorded when "
                    "it was written); its rows will be computed again"
                )
                path.unlink()
                continue
            found.append(Chunk(int(m[1]), int(m[2] or m[1]), path))
        for name in sorted(set(recorded) - seen):
            self._note(f"checkpoint chunk {self.side / name} is missing; its rows will be computed again")
        found.sort(key=lambda c: (c.first, -c.last))
        self.chunks = []
        reach = -1
        for chunk in found:
            if chunk.last <= reach:
                chunk.path.unlink()
                continue
            self.chunks.append(chunk)
            reach = chunk.last
        self.hashes = {c.path.name: recorded[c.path.name] for c in self.chunks}
        self.save_manifest()

    def load_keys(self) -> DoneKeys:
        """The keys of every checkpointed row (read two columns at a time, not the rows)."""
        import pyarrow.parquet as pq

        done = DoneKeys()
        for chunk in self.chunks:
            before: Key | None = None
            in_order = True
            with pq.ParquetFile(chunk.path) as pf:
                for batch in pf.iter_batches(batch_size=_READ_ROWS, columns=["record", "alt_index"]):
                    records = batch.column(0).to_numpy(zero_copy_only=False)
                    alts = batch.column(1).to_numpy(zero_copy_only=False)
                    done.add(records, alts)
                    if in_order and records.size:
                        in_order = _keys_sorted(records, alts, before)
                        before = (int(records[-1]), int(alts[-1]))
            if not in_order:  # written unsorted by an older hexamer: a checkpoint's worth of rows
                rows = pq.read_table(chunk.path).to_pylist()
                rows.sort(key=row_key)
                self._store(chunk.path, rows)
                self.save_manifest()
        self._compact()
        return done

    def add(self, rows: list[Row]) -> None:
        """Checkpoint ``rows`` (whole work units) as a new chunk, sorted."""
        rows.sort(key=row_key)
        n = self.chunks[-1].last + 1 if self.chunks else 0
        path = self.side / chunk_name(n, n)
        self._store(path, rows)
        self.chunks.append(Chunk(n, n, path))
        self.save_manifest()
        self._compact()

    def _compact(self) -> None:
        while len(self.chunks) >= CHUNK_FANIN and len({c.span for c in self.chunks[-CHUNK_FANIN:]}) == 1:
            self._merge_last(CHUNK_FANIN)

    def _merge_last(self, n: int) -> None:
        group = self.chunks[-n:]
        merged = Chunk(group[0].first, group[-1].last, self.side / chunk_name(group[0].first, group[-1].last))
        self._store(merged.path, merged_rows([c.path for c in group], self.extra_columns))
        for chunk in group:
            self.hashes.pop(chunk.path.name, None)
        self.save_manifest()
        for chunk in group:  # killed here: the next scan deletes what is left of them (unlisted)
            chunk.path.unlink(missing_ok=True)
        self.chunks[-n:] = [merged]

    def contigs(self) -> list[str]:
        """The rows' chromosomes, in the order of the first record naming each."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        first: dict[str, int] = {}
        for chunk in self.chunks:
            with pq.ParquetFile(chunk.path) as pf:
                for batch in pf.iter_batches(batch_size=_READ_ROWS, columns=["record", "chrom"]):
                    table = pa.Table.from_batches([batch]).group_by("chrom").aggregate([("record", "min")])
                    for chrom, record in zip(
                        table["chrom"].to_pylist(), table["record_min"].to_pylist(), strict=True
                    ):
                        if chrom and record < first.get(chrom, record + 1):
                            first[chrom] = record
        return sorted(first, key=first.__getitem__)

    def rows(self) -> Iterator[Row]:
        """Every checkpointed row, sorted by ``(record, alt_index)``, read lazily."""
        while len(self.chunks) > _MAX_MERGE:  # only after unusual histories; see _compact
            self._merge_last(CHUNK_FANIN)
        return merged_rows([c.path for c in self.chunks], self.extra_columns)
