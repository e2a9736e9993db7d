"""Resumable variant-effect jobs: a killed run continues, and ends with the output an
uninterrupted run would have written, byte for byte.

While scoring, finished rows go to a sidecar folder next to the output,
``.NAME.hexamer-resume/``: a ``meta.json`` describing the job (settings, the size and SHA-256 of
the input files' bytes, a fingerprint of the model) and Parquet chunks of rows, each written
atomically and then recorded with its SHA-256 in ``chunks.json``, sorted by
``(record, alt_index)`` and holding whole work units only: ``rows-NNNNNN.parquet`` every
``checkpoint_rows`` rows (or ``checkpoint_seconds``), and ``rows-FFFFFF-LLLLLL.parquet`` where
:data:`CHUNK_FANIN` consecutive chunks of the same span were merged into one, so N checkpoints
leave O(log N) chunks. On restart with ``resume=True`` only the keys of the checkpointed rows are
loaded (about a byte per record), units whose rows are all there are not recomputed, and
everything else is computed exactly as before (units depend only on the input, so batch shapes and
numbers are the same). The final output is a k-way merge of the chunks, read in batches and
streamed into the writer, written atomically; the sidecar is then removed. So memory does not grow
with the number of rows, except for the ``ok`` scores (8 bytes each) and kinds (1 byte) that
:class:`VepRunResult` keeps for plots. A sidecar made by a different job (other settings, inputs
or model) is refused rather than mixed in.

Trust: inputs are identified by content, so an edited VCF with the same size and mtime is a
different job (hashing costs one read of each input at start: about 1 s per 1.5 GB here). On
resume every chunk is hashed again before use; a chunk whose bytes differ from the recorded hash,
or that ``chunks.json`` does not list (written but never committed), is deleted and its rows are
computed again, with a note naming it.
"""

from __future__ import annotations

import collections
import hashlib
import heapq
import json
import os
import re
import shlex
import shutil
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from hexamer import __version__
from hexamer.io import TableWriter, atomic_path
from hexamer.io.contigs import read_rename_file
from hexamer.vep.engine import ROW_COLUMNS, VepSettings, iter_blocks
from hexamer.vep.output import (
    VcfWriteResult,
    output_kind,
    resolve_info_fields,
    row_schema,
    write_vep_output,
)
from hexamer.vep.summary import reason_category
from hexamer.vep.variants import FastaError, Reference, VcfInputError

if TYPE_CHECKING:
    from hexamer.calibration import Calibration
    from hexamer.carbon import Carbon

__all__ = [
    "CHUNK_FANIN",
    "ResumeError",
    "VepRunResult",
    "file_sha256",
    "model_fingerprint",
    "run_vep",
    "sidecar_dir",
]

PathLike = str | os.PathLike[str]
Row = dict[str, Any]
Key = tuple[int, int]
_META = "meta.json"
_MANIFEST = "chunks.json"
#: 2: inputs identified by SHA-256 of their bytes, chunks listed with their SHA-256 in chunks.json,
#: n_scored_bp/n_oov_bp columns, equal-length indel windows
_VERSION = 2
#: meta.json keys that describe the run but do not make it a different job
_NOT_COMPARED = ("command",)
_CHUNK_NAME = re.compile(r"^rows-(\d+)(?:-(\d+))?\.parquet$")
#: This many consecutive checkpoint chunks of the same span are merged into one.
CHUNK_FANIN = 16
#: The final merge reads at most this many chunks at once (more only after unusual histories).
_MAX_MERGE = 64
#: Rows read at a time, shared out among the chunks being merged.
_READ_ROWS = 16_384
#: Rows per batch (Parquet row group) written to a chunk.
_WRITE_ROWS = 16_384


class ResumeError(ValueError):
    """The sidecar of an earlier run cannot be used for this one."""


@dataclass
class VepRunResult:
    """Summary of a finished job: rows per status, rows taken from a checkpoint, the VCF writer's report."""

    output: str
    n_rows: int
    status_counts: dict[str, int] = field(default_factory=dict)
    #: rows per ``(status, reason category)`` (:func:`hexamer.vep.summary.reason_category`)
    reason_counts: dict[tuple[str, str], int] = field(default_factory=dict)
    n_resumed: int = 0
    vcf: VcfWriteResult | None = None
    #: scores of the ``ok`` rows (an ``array('d')``) and their variant kinds (SNV, MNV, insertion,
    #: ...: a sequence of str stored as one byte each), in output order, for plots
    scores: Sequence[float] = field(default_factory=lambda: array("d"))
    kinds: Sequence[str] = field(default_factory=lambda: _Labels())


def sidecar_dir(output: PathLike) -> Path:
    """The checkpoint folder of an output file."""
    path = Path(output)
    return path.with_name(f".{path.name}.hexamer-resume")


def model_fingerprint(carbon: Carbon) -> str:
    """A short hash of the model's configuration and a few of its weights (not of the folder path)."""
    remote = getattr(carbon, "fingerprint", None)  # hexamer.remote: server, model, top-N
    if remote is not None:
        return str(remote())
    h = hashlib.sha256(repr(carbon.model.config).encode())
    params = list(carbon.model.named_parameters())
    for name, param in params[:: max(1, len(params) // 8)]:
        h.update(name.encode())
        h.update(param.detach().reshape(-1)[:64].float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def file_sha256(path: PathLike) -> str:
    """SHA-256 of a file's bytes, streamed (about 1.5 GB/s on one core)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _file_id(path: PathLike) -> dict[str, Any]:
    """An input by content: an edited file is another input even with the same size and mtime."""
    return {"size": os.stat(path).st_size, "sha256": file_sha256(path)}


def _command() -> str:
    """This process's command line, as a shell would take it (``hexamer vep ...`` from the CLI)."""
    argv = list(sys.argv) or ["python"]
    if os.path.basename(argv[0]) in ("hexamer", "__main__.py"):
        argv[0] = "hexamer"
    return shlex.join(argv)


def _key(row: Mapping[str, Any]) -> Key:
    return row["record"], row["alt_index"]


class _Labels(Sequence[str]):
    """Strings from a small vocabulary (variant kinds), one small integer code per item."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._names: list[str] = []
        self._code: dict[str, int] = {}
        self._codes = array("B")
        for value in values:
            self.append(value)

    def append(self, value: str) -> None:
        code = self._code.get(value)
        if code is None:
            code = self._code[value] = len(self._names)
            self._names.append(value)
            if code > 255 and self._codes.typecode == "B":
                self._codes = array("I", self._codes)
        self._codes.append(code)

    def __len__(self) -> int:
        return len(self._codes)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self._names[c] for c in self._codes[index]]
        return self._names[self._codes[index]]

    def __iter__(self) -> Iterator[str]:
        names = self._names
        return (names[c] for c in self._codes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} labels of {self._names!r}>"


class _DoneKeys(Mapping[Key, Row]):
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
class _Chunk:
    """A sorted chunk holding the rows of checkpoints ``first`` to ``last`` (merged when several)."""

    first: int
    last: int
    path: Path

    @property
    def span(self) -> int:
        return self.last - self.first + 1


def _chunk_name(first: int, last: int) -> str:
    return f"rows-{first:06d}.parquet" if first == last else f"rows-{first:06d}-{last:06d}.parquet"


def _write_chunk(path: Path, rows: Iterable[Row]) -> None:
    """Write rows (plain values, in the order given) to a Parquet chunk, atomically."""
    import pyarrow as pa

    schema = row_schema()
    it = iter(rows)
    with TableWriter(path, schema=schema) as writer:
        while batch := list(islice(it, _WRITE_ROWS)):
            writer.write_batch(pa.Table.from_pylist(batch, schema=schema))


def _read_rows(path: Path, batch_rows: int) -> Iterator[Row]:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        for batch in pf.iter_batches(batch_size=batch_rows, columns=list(ROW_COLUMNS)):
            yield from batch.to_pylist()


def _merged(paths: Sequence[Path]) -> Iterator[Row]:
    """The rows of sorted chunks as one sorted stream, read lazily (a key met twice is kept once)."""
    batch_rows = max(256, _READ_ROWS // max(1, len(paths)))
    last: Key | None = None
    for row in heapq.merge(*(_read_rows(p, batch_rows) for p in paths), key=_key):
        key = _key(row)
        if key != last:
            last = key
            yield row


def _keys_sorted(records: np.ndarray, alts: np.ndarray, before: Key | None) -> bool:
    if before is not None and records.size:
        records = np.concatenate([[before[0]], records])
        alts = np.concatenate([[before[1]], alts])
    d_rec, d_alt = np.diff(records), np.diff(alts)
    return bool(np.all((d_rec > 0) | ((d_rec == 0) & (d_alt >= 0))))


class _Chunks:
    """The sidecar's row chunks: each written sorted by ``(record, alt_index)``; every
    :data:`CHUNK_FANIN` consecutive chunks of one span are merged into one (so N checkpoints leave
    O(log N) chunks), and the final output is a k-way merge of them all.

    A chunk counts once ``chunks.json`` lists it with the SHA-256 of its bytes (written after the
    chunk itself, atomically); :meth:`scan` drops chunks it does not list or whose bytes changed.
    """

    def __init__(self, side: Path, on_note: Callable[[str], None] | None = None) -> None:
        self.side = side
        self.chunks: list[_Chunk] = []
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
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._note(f"{path} is unreadable ({exc}); every checkpointed row will be computed again")
            return {}

    def _store(self, path: Path, rows: Iterable[Row]) -> None:
        """Write a chunk and note its hash (committed by the next :meth:`save_manifest`)."""
        _write_chunk(path, rows)
        self.hashes[path.name] = file_sha256(path)

    def scan(self) -> None:
        """Find the chunks of an earlier run and check them against ``chunks.json``: a chunk it
        does not list (killed before it was recorded) is deleted, one whose bytes changed is
        deleted with a note (its rows are computed again). A chunk inside a merged one (the merge
        was killed before it removed its inputs) is deleted; chunks of an older version are sorted."""
        recorded = self._read_manifest()
        found: list[_Chunk] = []
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
            found.append(_Chunk(int(m[1]), int(m[2] or m[1]), path))
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

    def load_keys(self) -> _DoneKeys:
        """The keys of every checkpointed row (read two columns at a time, not the rows)."""
        import pyarrow.parquet as pq

        done = _DoneKeys()
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
                rows.sort(key=_key)
                self._store(chunk.path, rows)
                self.save_manifest()
        self._compact()
        return done

    def add(self, rows: list[Row]) -> None:
        """Checkpoint ``rows`` (whole work units) as a new chunk, sorted."""
        rows.sort(key=_key)
        n = self.chunks[-1].last + 1 if self.chunks else 0
        path = self.side / _chunk_name(n, n)
        self._store(path, rows)
        self.chunks.append(_Chunk(n, n, path))
        self.save_manifest()
        self._compact()

    def _compact(self) -> None:
        while len(self.chunks) >= CHUNK_FANIN and len({c.span for c in self.chunks[-CHUNK_FANIN:]}) == 1:
            self._merge_last(CHUNK_FANIN)

    def _merge_last(self, n: int) -> None:
        group = self.chunks[-n:]
        merged = _Chunk(
            group[0].first, group[-1].last, self.side / _chunk_name(group[0].first, group[-1].last)
        )
        self._store(merged.path, _merged([c.path for c in group]))
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
        return _merged([c.path for c in self.chunks])


class _Tally:
    """Counts the rows streaming into the output; keeps the ``ok`` scores and kinds for plots."""

    def __init__(self) -> None:
        self.n_rows = 0
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[tuple[str, str]] = Counter()
        self.scores = array("d")
        self.kinds = _Labels()

    def watch(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            self.n_rows += 1
            self.counts[str(row["status"])] += 1
            if row["status"] != "ok":
                self.reasons[(str(row["status"]), reason_category(row.get("reason")))] += 1
            if row["status"] == "ok" and row["score"] is not None:
                self.scores.append(float(row["score"]))
                self.kinds.append(str(row["kind"]))
            yield row


def _flag(key: str, value: object) -> str:
    """The ``hexamer vep`` option that sets ``key`` to ``value``."""
    name = "--" + key.replace("_", "-")
    if isinstance(value, bool):
        return name if value else f"(no {name})"
    return f"{name} {value}"


def _different_job(side: Path, old: object, meta: dict) -> str:
    """Why a sidecar cannot be resumed: what changed and, for settings, their old and new values
    with the option that restores the old one (e.g. a default that moved between versions)."""
    old = old if isinstance(old, dict) else {}  # a meta.json that is valid JSON but not an object
    changed = sorted(k for k in meta.keys() | old.keys() if old.get(k) != meta.get(k))
    lines = [f"{side} was made by a different job (changed: {', '.join(changed)})"]
    old_settings = old.get("settings") if isinstance(old.get("settings"), dict) else {}
    diffs = [
        (key, old_settings.get(key), value)
        for key, value in meta["settings"].items()
        if old_settings.get(key) != value
    ]
    if diffs:
        shown = "; ".join(f"{key} {before!r} -> {after!r}" for key, before, after in diffs)
        flags = " ".join(_flag(key, before) for key, before, _ in diffs if before is not None)
        lines.append(f"settings: {shown}" + (f" (to resume, pass the old values: {flags})" if flags else ""))
    lines.append("remove it or run without resume to start over")
    return "; ".join(lines)


def run_vep(
    carbon: Carbon,
    vcf: PathLike,
    fasta: PathLike,
    output: PathLike,
    *,
    resume: bool = False,
    checkpoint_rows: int = 5000,
    checkpoint_seconds: float = 60.0,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
    info_fields: str | Sequence[str] | None = None,
    calibration: Calibration | None = None,
    **settings: Any,
) -> VepRunResult:
    """Score a VCF into ``output`` (annotated VCF/BCF or a table, by extension) with checkpoints.

    ``settings`` are :class:`~hexamer.vep.engine.VepSettings` fields (``recipe``, ``window``,
    ``context``, ``context_grid``, ``rc_average``, ``batch_size``, ...). Finished rows are
    checkpointed every ``checkpoint_rows`` rows or ``checkpoint_seconds``, whichever comes first.
    Without ``resume`` an old sidecar is discarded and the job starts over; with it, the job
    continues from the sidecar (or starts over when there is none). ``renames`` maps VCF contig
    names to FASTA ones (a bcftools ``--rename-chrs`` file or a dict). ``info_fields`` (names, a
    comma-separated string, or ``"all"``) adds those INFO fields of the input to a table output
    as ``info_NAME`` columns (see :func:`~hexamer.vep.output.resolve_info_fields`); it is checked
    before any scoring. A VCF output carries provenance header lines (``##hexamer_version``,
    ``##hexamer_model``, ``##hexamer_settings``, ``##hexamer_command``: the command that started
    the job) and names in ``on_note`` the rejects table of records it could not hold.
    ``calibration`` (:class:`hexamer.calibration.Calibration`, checked against the model and
    settings before any scoring) adds ``HEXAMER_RAW``/``HEXAMER_PHRED`` (a table: ``phred``).
    """
    note = on_note or (lambda _: None)
    out = Path(output)
    kind = output_kind(out)  # an unsupported extension fails now, not after hours of scoring
    if not out.parent.is_dir():
        raise FileNotFoundError(f"output folder {str(out.parent)!r} does not exist")
    for path, what, error in ((vcf, "VCF/BCF", VcfInputError), (fasta, "FASTA", FastaError)):
        if not os.path.isfile(path):
            raise error(f"{os.fspath(path)}: no such {what} file")
    checked = VepSettings(**settings).checked(carbon, on_note=on_note)
    if calibration is not None:
        calibration.check(carbon, checked)
    info = resolve_info_fields(vcf, info_fields) if info_fields and kind == "table" else None
    meta = {
        "version": _VERSION,
        "settings": checked.as_dict(),
        "vcf": _file_id(vcf),
        "fasta": _file_id(fasta),
        "model": model_fingerprint(carbon),
        "output": out.name,
    }
    renames = read_rename_file(renames) if isinstance(renames, str | os.PathLike) else renames
    if renames:  # which records are scored depends on it
        meta["renames"] = dict(sorted(renames.items()))
    command = _command()
    side = sidecar_dir(out)
    chunks = _Chunks(side, note)
    done = _DoneKeys()
    if side.exists() and resume:
        try:
            old = json.loads((side / _META).read_text())
        except (OSError, ValueError) as exc:
            raise ResumeError(
                f"{side}: unreadable checkpoint ({exc}); remove it or run without resume"
            ) from exc
        if isinstance(old, dict) and isinstance(old.get("settings"), dict):
            # a sidecar written before a setting existed ran with that setting's default
            defaults = VepSettings().as_dict()
            for key, value in checked.as_dict().items():
                if key not in old["settings"] and value == defaults[key]:
                    old["settings"][key] = value
        if isinstance(old, dict):
            command = str(old.get("command") or command)  # the provenance of the job is its first run
            old = {k: v for k, v in old.items() if k not in _NOT_COMPARED}
        if old != meta:
            raise ResumeError(_different_job(side, old, meta))
        chunks.scan()
        done = chunks.load_keys()
    elif side.exists():
        shutil.rmtree(side)
    fresh = not side.exists()
    if fresh:
        side.mkdir()
        chunks.save_manifest()
        with atomic_path(side / _META) as tmp:
            tmp.write_text(json.dumps({**meta, "command": command}, indent=1))

    n_resumed = len(done)
    pending: list[Row] = []
    last_flush = time.monotonic()
    try:
        with Reference(fasta, renames=renames) as reference:
            for units in iter_blocks(
                carbon,
                vcf,
                reference,
                checked,
                done=done if n_resumed else None,
                on_progress=on_progress,
                on_note=on_note,
            ):
                for unit_rows in units:
                    if n_resumed:  # rows of checkpointed units are stubs: their rows are in a chunk
                        pending.extend(r for r in unit_rows if (r["record"], r["alt_index"]) not in done)
                    else:
                        pending.extend(unit_rows)
                    if pending and (
                        len(pending) >= checkpoint_rows or time.monotonic() - last_flush >= checkpoint_seconds
                    ):
                        chunks.add(pending)
                        pending = []
                        last_flush = time.monotonic()
    except (VcfInputError, FastaError):
        if fresh and not chunks.chunks:  # an unreadable input: leave no empty checkpoint behind
            shutil.rmtree(side, ignore_errors=True)
        raise
    if pending:
        chunks.add(pending)
    del done, pending

    tally = _Tally()
    provenance = {
        "version": __version__,
        "model": str(meta["model"]),
        "settings": ",".join(f"{k}={v}" for k, v in checked.as_dict().items()),
        "command": command,
    }
    contigs = chunks.contigs() if kind == "vcf" else None
    rows = tally.watch(chunks.rows())
    if calibration is not None:
        rows = calibration.annotate(rows)
    result = write_vep_output(
        out,
        vcf,
        rows,
        recipe=checked.recipe,
        presorted=True,
        contigs=contigs,
        provenance=provenance,
        info=info,
        calibrated=calibration is not None,
    )
    collections.deque(rows, maxlen=0)  # rows the VCF had no record for still count
    shutil.rmtree(side, ignore_errors=True)
    if isinstance(result, VcfWriteResult) and result.rejects is not None:
        note(
            f"{result.n_rejected} input record(s) could not be written as VCF records (no CHROM/POS "
            f"a VCF can hold); they are listed, with their reasons, in {result.rejects}"
        )
    return VepRunResult(
        output=str(out),
        n_rows=tally.n_rows,
        status_counts=dict(tally.counts),
        reason_counts=dict(tally.reasons),
        n_resumed=n_resumed,
        vcf=result if isinstance(result, VcfWriteResult) else None,
        scores=tally.scores,
        kinds=tally.kinds,
    )
