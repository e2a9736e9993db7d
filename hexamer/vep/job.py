"""Resumable variant-effect jobs: a killed run continues, and ends with the output an
uninterrupted run would have written, byte for byte.

While scoring, finished rows go to a sidecar folder next to the output,
``.NAME.hexamer-resume/``: a ``meta.json`` describing the job (settings, the size and SHA-256 of
the input files' bytes, a fingerprint of the model) and Parquet chunks of rows, each written
atomically and then recorded with its SHA-256 in ``chunks.json``, sorted by
``(record, alt_index)`` and holding whole work units only: ``rows-NNNNNN.parquet`` every
``checkpoint_rows`` rows (or ``checkpoint_seconds``), and ``rows-FFFFFF-LLLLLL.parquet`` where
:data:`~hexamer.vep.checkpoint.CHUNK_FANIN` consecutive chunks of the same span were merged into one, so N checkpoints
leave O(log N) chunks. On restart with ``resume=True`` only the keys of the checkpointed rows are
loaded (about a byte per record), units whose rows are all there are not recomputed, and
everything else is computed exactly as before (units depend only on the input, so batch shapes and
numbers are the same). The final output is a k-way merge of the chunks, read in batches and
streamed into the writer, written atomically; the sidecar is then removed. So memory does not grow
with the number of rows, except for the ``ok`` scores (8 bytes each) and kinds (1 byte) that
:class:`VepRunResult` keeps for plots. A sidecar made by a different job (other settings, inputs
or model) is refused rather than mixed in.

Trust: inputs are identified by size, mtime and the SHA-256 of a sample of their bytes (the first
and last MiB and 256 blocks between, :func:`~hexamer.vep.checkpoint.input_identity`), so the
input is read once, for scoring, not once more to hash it: an edited VCF is a different job unless
the edit keeps its size and mtime and misses every sampled byte, and a copy made without keeping
its mtime is a different input. On resume every chunk is hashed again before use; a chunk whose bytes differ from the recorded hash,
or that ``chunks.json`` does not list (written but never committed), is deleted and its rows are
computed again, with a note naming it.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shlex
import shutil
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from hexamer import __version__
from hexamer.io import atomic_path
from hexamer.io.contigs import read_rename_file
from hexamer.io.fasta import FastaError
from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import VcfInputError, WriterView, read_vcf
from hexamer.vep.checkpoint import ChunkStore, DoneKeys, input_identity
from hexamer.vep.output import output_kind, write_vep_output
from hexamer.vep.rows import Row
from hexamer.vep.scoring import iter_record_blocks, settings_from
from hexamer.vep.settings import VepSettings
from hexamer.vep.summary import reason_category
from hexamer.vep.table_output import join_info, join_kept_info, keep_info, resolve_info_fields, write_rows
from hexamer.vep.units import RunnerFactory
from hexamer.vep.vcf_output import VcfWriteResult

if TYPE_CHECKING:
    from hexamer.calibration.table import Calibration
    from hexamer.carbon import Carbon

__all__ = [
    "ResumeError",
    "VepRunResult",
    "check_job_paths",
    "read_checkpoint_meta",
    "run_vep",
    "sidecar_dir",
    "write_job_output",
]

PathLike = str | os.PathLike[str]
_META = "meta.json"
#: the data lines of a text VCF input, copied by the scoring pass for the VCF writer
_BODY = "records.vcf"
#: the chosen INFO values of its records, kept by the scoring pass for a table's ``info_*`` columns
_INFO = "info.jsonl"
#: 2: inputs identified by SHA-256 of their bytes, chunks listed with their SHA-256 in chunks.json,
#: n_scored_bp/n_oov_bp columns, equal-length indel windows; 3: inputs identified by size, mtime
#: and a sample of their bytes (:func:`~hexamer.vep.checkpoint.input_identity`)
_VERSION = 3
#: meta.json keys that describe the run but do not make it a different job
_NOT_COMPARED = ("command",)


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
    #: input records per VCF contig (first-seen order), counted as the rows were written: what
    #: :func:`hexamer.io.vcf.contig_survey.survey_contigs` needs after a job, with no second read
    contig_records: dict[str, int] = field(default_factory=dict)


def sidecar_dir(output: PathLike) -> Path:
    """The checkpoint folder of an output file."""
    path = Path(output)
    return path.with_name(f".{path.name}.hexamer-resume")


def _command() -> str:
    """This process's command line, as a shell would take it (``hexamer vep ...`` from the CLI)."""
    argv = list(sys.argv) or ["python"]
    if os.path.basename(argv[0]) in ("hexamer", "__main__.py"):
        argv[0] = "hexamer"
    return shlex.join(argv)


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


class _Tally:
    """Counts the rows streaming into the output; keeps the ``ok`` scores and kinds for plots."""

    def __init__(self) -> None:
        self.n_rows = 0
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[tuple[str, str]] = Counter()
        self.scores = array("d")
        self.kinds = _Labels()
        self.contigs: dict[str, int] = {}

    def watch(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            self.n_rows += 1
            if row["alt_index"] == 0:  # every record has a row 0 (one without ALT too)
                chrom = str(row.get("chrom") or "")
                self.contigs[chrom] = self.contigs.get(chrom, 0) + 1
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


def _job_meta(
    vcf: PathLike,
    fasta: PathLike,
    out: Path,
    checked: VepSettings,
    model: str,
    renames: Mapping[str, str] | None,
    extra: Mapping[str, str],
) -> dict[str, Any]:
    """What makes a job this job (``meta.json``, compared on resume)."""
    meta: dict[str, Any] = {
        "version": _VERSION,
        "settings": checked.as_dict(),
        "vcf": input_identity(vcf),
        "fasta": input_identity(fasta),
        "model": model,
        "output": out.name,
    }
    if renames:  # which records are scored depends on it
        meta["renames"] = dict(sorted(renames.items()))
    if extra:  # a fine-tuned head's outputs: another head is another job
        meta["extra_columns"] = list(extra)
    return meta


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
    settings: VepSettings | None = None,
    calibration: Calibration | None = None,
    make_runner: RunnerFactory | None = None,
    extra_columns: Mapping[str, str] | None = None,
    **fields: Any,
) -> VepRunResult:
    """Score a VCF into ``output`` (annotated VCF/BCF or a table, by extension) with checkpoints.

    ``settings`` (a :class:`~hexamer.vep.settings.VepSettings`, checked here once) decide the
    numbers; its fields may instead be given as keywords (``recipe``, ``window``, ``context``,
    ``context_grid``, ``rc_average``, ``batch_size``, ...), not both. Finished rows are
    checkpointed every ``checkpoint_rows`` rows or ``checkpoint_seconds``, whichever comes first.
    Without ``resume`` an old sidecar is discarded and the job starts over; with it, the job
    continues from the sidecar (or starts over when there is none). ``renames`` maps VCF contig
    names to FASTA ones (a bcftools ``--rename-chrs`` file or a dict). ``info_fields`` (names, a
    comma-separated string, or ``"all"``) adds those INFO fields of the input to a table output
    as ``info_NAME`` columns (see :func:`~hexamer.vep.table_output.resolve_info_fields`); it is checked
    before any scoring. A VCF output carries provenance header lines (``##hexamer_version``,
    ``##hexamer_model``, ``##hexamer_settings``, ``##hexamer_command``: the command that started
    the job) and names in ``on_note`` the rejects table of records it could not hold.
    ``calibration`` (:class:`hexamer.calibration.Calibration`, checked against the model and
    settings before any scoring) adds ``HEXAMER_RAW``/``HEXAMER_PHRED`` (a table: ``phred``).
    ``make_runner`` (see :func:`~hexamer.vep.scoring.iter_record_blocks`) and ``extra_columns``
    (``column -> description``: float columns its rows carry) reuse the job for a fine-tuned head.
    """
    note = on_note or (lambda _: None)
    out = Path(output)
    kind = check_job_paths(vcf, fasta, out)
    checked = settings_from(settings, fields).checked(carbon, on_note=on_note)
    if calibration is not None:
        calibration.check(carbon, checked)
    info = resolve_info_fields(vcf, info_fields) if info_fields and kind == "table" else None
    renames = read_rename_file(renames) if isinstance(renames, str | os.PathLike) else renames
    extra = dict(extra_columns or {})
    meta = _job_meta(vcf, fasta, out, checked, carbon.backend.fingerprint(), renames, extra)
    side = sidecar_dir(out)
    chunks, done, command, fresh = _open_sidecar(
        side, meta, checked, resume, ChunkStore(side, note, tuple(extra))
    )
    n_resumed = len(done)
    view = WriterView() if kind == "vcf" else None
    try:
        with contextlib.ExitStack() as stack:
            reference = stack.enter_context(Reference(fasta, renames=renames))
            if view is not None:  # the one pass that scores the input keeps what the writer needs
                view.body = stack.enter_context(open(side / _BODY, "wb"))
            records = read_vcf(vcf, view=view, keep_records=bool(info))
            if info:  # and the INFO values a table's columns take
                records = keep_info(records, info, stack.enter_context(open(side / _INFO, "wb")))
            blocks = iter_record_blocks(
                carbon,
                records,
                reference,
                checked,
                done=done if n_resumed else None,
                on_progress=on_progress,
                on_note=on_note,
                make_runner=make_runner,
            )
            _checkpoint(blocks, chunks, done if n_resumed else None, checkpoint_rows, checkpoint_seconds)
    except (VcfInputError, FastaError):
        if fresh and not chunks.chunks:  # an unreadable input: leave no empty checkpoint behind
            shutil.rmtree(side, ignore_errors=True)
        raise
    del done
    contigs = chunks.contigs() if kind == "vcf" else None
    return write_job_output(
        out,
        vcf,
        chunks.rows(),
        checked,
        model=str(meta["model"]),
        command=command,
        contigs=contigs,
        info=info,
        calibration=calibration,
        note=note,
        n_resumed=n_resumed,
        clean_up=lambda: shutil.rmtree(side, ignore_errors=True),
        extra_columns=extra,
        source=view,
        info_kept=side / _INFO if info else None,
    )


def _open_sidecar(
    side: Path, meta: dict[str, Any], checked: VepSettings, resume: bool, chunks: ChunkStore
) -> tuple[ChunkStore, DoneKeys, str, bool]:
    """``(chunks, done keys, command, fresh)``: the sidecar of an earlier run of this job when
    ``resume`` (a sidecar of another job raises :class:`ResumeError`), else a new one."""
    command = _command()
    done = DoneKeys()
    if side.exists() and resume:
        old = read_checkpoint_meta(side, "checkpoint")
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
    return chunks, done, command, fresh


def _checkpoint(
    blocks: Iterable[Iterable[list[Row]]],
    chunks: ChunkStore,
    done: Mapping[tuple[int, int], Row] | None,
    checkpoint_rows: int,
    checkpoint_seconds: float,
) -> None:
    """Stream the rows of ``blocks`` into ``chunks``, a chunk every ``checkpoint_rows`` rows or
    ``checkpoint_seconds``; rows whose key is in ``done`` (stubs of checkpointed units) are
    already in a chunk."""
    pending: list[Row] = []
    last_flush = time.monotonic()
    for units in blocks:
        for unit_rows in units:
            if done is not None:
                pending.extend(r for r in unit_rows if (r["record"], r["alt_index"]) not in done)
            else:
                pending.extend(unit_rows)
            if pending and (
                len(pending) >= checkpoint_rows or time.monotonic() - last_flush >= checkpoint_seconds
            ):
                chunks.add(pending)
                pending = []
                last_flush = time.monotonic()
    if pending:
        chunks.add(pending)


def read_checkpoint_meta(folder: Path, what: str) -> Any:
    """The ``meta.json`` of a checkpoint ``folder`` (``what`` it is, for the error); one that
    cannot be read or parsed raises :class:`ResumeError` saying how to go on."""
    try:
        return json.loads((folder / _META).read_text())
    except (OSError, ValueError) as exc:
        raise ResumeError(f"{folder}: unreadable {what} ({exc}); remove it or run without resume") from exc


def check_job_paths(vcf: PathLike, fasta: PathLike, out: Path) -> str:
    """The output's kind (``vcf`` or ``table``, by extension) once the output folder and both inputs
    exist: a bad path fails now, not after hours of scoring."""
    kind = output_kind(out)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"output folder {str(out.parent)!r} does not exist")
    for path, what, error in ((vcf, "VCF/BCF", VcfInputError), (fasta, "FASTA", FastaError)):
        if not os.path.isfile(path):
            raise error(f"{os.fspath(path)}: no such {what} file")
    return kind


def write_job_output(
    out: Path,
    vcf: PathLike,
    rows: Iterable[Row],
    checked: VepSettings,
    *,
    model: str,
    command: str,
    contigs: Any,
    info: Any,
    calibration: Calibration | None,
    note: Callable[[str], None],
    n_resumed: int,
    clean_up: Callable[[], None],
    extra_columns: Mapping[str, str] | None = None,
    source: WriterView | None = None,
    info_kept: Path | None = None,
) -> VepRunResult:
    """Write a finished job's rows (in input order) as ``out`` with its provenance, calibrated when
    asked, counting them as they go; ``clean_up`` then removes the job's checkpoint. ``source``
    and ``info_kept`` (:func:`~hexamer.vep.table_output.keep_info`'s file) are what the pass that
    scored the input kept of it for the writer, so it is not read again."""
    tally = _Tally()
    provenance = {
        "version": __version__,
        "model": model,
        "settings": ",".join(f"{k}={v}" for k, v in checked.as_dict().items()),
        "command": command,
    }
    if info:  # a table: its INFO columns first, so that a row they fail is counted as failed
        rows = join_kept_info(rows, info_kept, info) if info_kept is not None else join_info(rows, vcf, info)
    rows = tally.watch(rows)
    if calibration is not None:
        rows = calibration.annotate(rows)
    result: VcfWriteResult | int
    if info:
        result = write_rows(
            out,
            rows,
            presorted=True,
            info=info,
            calibrated=calibration is not None,
            extra_columns=tuple(extra_columns or ()),
        )
    else:
        result = write_vep_output(
            out,
            vcf,
            rows,
            recipe=checked.recipe,
            presorted=True,
            contigs=contigs,
            provenance=provenance,
            calibrated=calibration is not None,
            extra_columns=extra_columns,
            source=source,
        )
    collections.deque(rows, maxlen=0)  # rows the VCF had no record for still count
    clean_up()
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
        contig_records=tally.contigs,
    )
