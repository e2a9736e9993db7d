"""What ``hexamer generate``, ``hexamer score`` and the pipeline commands share: loading the model
(its threads, a ``--calibration`` file), reading records, the progress bar, the report.

A bad record never stops a job: it is reported (stderr, and a ``status``/``error`` column in table
outputs) and every other record is processed. Outputs are written atomically.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import Progress

from hexamer.cli.app import (
    describe_counts,
    err_console,
    fail,
    resolve_model,
)
from hexamer.cli.checks import is_stdio
from hexamer.progress import progress_bar as make_progress_bar

if TYPE_CHECKING:
    from hexamer.calibration import Calibration
    from hexamer.carbon import Carbon
    from hexamer.io import BadRecord, SequenceRecord

__all__ = [
    "JobProgress",
    "count_records",
    "fail_if_none_ok",
    "job_progress",
    "load_calibration",
    "load_carbon",
    "progress_bar",
    "read_job_records",
    "report_skipped",
    "set_threads",
]


def load_carbon(model: str | None, dtype: str, device: str | None, batch_size: int) -> Carbon:
    from hexamer.carbon import Carbon
    from hexamer.engine import EngineConfig

    try:
        engine = EngineConfig(max_batch_size=batch_size)
        return Carbon.from_pretrained(resolve_model(model), dtype=dtype, device=device, engine=engine)
    except (FileNotFoundError, ValueError) as exc:  # ModelFolderError is a ValueError
        fail(exc)


def set_threads(threads: int | None) -> None:
    """``--threads``: PyTorch intra-op threads (None keeps PyTorch's default, one per core)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def load_calibration(path: Path | None) -> Calibration | None:
    """``--calibration`` (``hexamer vep``, ``hexamer ism``): the file read, or a clean exit saying
    what is wrong with it; None without the option."""
    if path is None:
        return None
    from hexamer.calibration import Calibration, CalibrationError

    try:
        return Calibration.load(path)
    except CalibrationError as exc:
        fail(exc)


def read_job_records(inputs: list[str], input_file: Path | None) -> Iterator[SequenceRecord | BadRecord]:
    """Records from the command line or a file, checked by the same rule either way (a character
    that is not an IUPAC nucleotide code makes a record bad, as in :func:`hexamer.io.read_sequences`).
    The file is opened and checked at the call, so an unusable one (not FASTA, binary, one record
    without an id) stops the command before a model loads; a later problem stops it while reading."""
    from hexamer.io import SequenceInputError, read_sequences

    if input_file is not None and inputs:
        raise typer.BadParameter("give sequences as arguments or with --input, not both")
    if input_file is None:
        if not inputs:
            raise typer.BadParameter("give sequences as arguments or a file with --input")
        return _argument_records(inputs)
    try:
        records = read_sequences(str(input_file))
    except SequenceInputError as exc:
        fail(exc)
    return _stop_on_file_error(records)


def _stop_on_file_error(
    records: Iterator[SequenceRecord | BadRecord],
) -> Iterator[SequenceRecord | BadRecord]:
    from hexamer.io import SequenceInputError

    try:
        yield from records
    except SequenceInputError as exc:
        fail(exc)


def _argument_records(inputs: list[str]) -> Iterator[SequenceRecord | BadRecord]:
    from hexamer.backend.inputs import sequence_problem
    from hexamer.io import BadRecord, SequenceRecord

    for i, s in enumerate(inputs):
        ident = f"seq{i + 1}"
        problem = "empty sequence" if not s.strip() else sequence_problem("".join(s.split()))
        if problem is not None and "<dna>" not in s:  # generate prompts may hold tags
            yield BadRecord(index=i, id=ident, reason=problem)
        else:
            yield SequenceRecord(id=ident, sequence=s, index=i)


def count_records(inputs: list[str] | None, input_file: Path | None) -> int | None:
    """How many records a job will read: the progress bar's total (None when unknown: standard
    input, or a file the real pass will report as unreadable). Reading a file twice costs seconds
    per gigabyte; the model work it measures costs far more."""
    from hexamer.io import SequenceInputError, read_sequences

    if input_file is None:
        return len(inputs or [])
    if is_stdio(input_file):
        return None
    try:
        return sum(1 for _ in read_sequences(str(input_file)))
    except (SequenceInputError, OSError, ValueError):
        return None


class JobProgress:
    """One task of the job's progress bar: ``advance`` moves it by records done, ``count`` shows
    the rate of something else (bases, variants) per second of the task."""

    def __init__(self, progress: Progress, task: Any, digits: int) -> None:
        self.progress, self.task, self.digits = progress, task, digits
        self.counted = 0

    def advance(self, n: int) -> None:
        self.progress.update(self.task, advance=n)

    def tick(self, n: int, unit: str) -> None:
        """``n`` more records done, each one ``unit`` of the rate."""
        self.advance(n)
        self.count(n, unit)

    def count(self, n: int, unit: str) -> None:
        self.counted += n
        elapsed = self.progress.tasks[self.task].elapsed or 1e-9
        self.progress.update(self.task, rate=f"{self.counted / elapsed:,.{self.digits}f} {unit}/s")


@contextlib.contextmanager
def job_progress(what: str, total: int | None, digits: int = 0) -> Iterator[JobProgress]:
    """The job's progress bar with one task, ``what`` of ``total`` (None: unknown)."""
    with progress_bar() as progress:
        yield JobProgress(progress, progress.add_task(what, total=total, rate=""), digits)


def progress_bar() -> Progress:
    """The bar of a sequence job: records done, the rate as the job reports it."""
    return make_progress_bar(
        "[bold]{task.description}", "{task.fields[rate]}", console=err_console, transient=False
    )


def report_skipped(bad: list[str]) -> None:
    for line in bad[:20]:
        err_console.print(f"[yellow]skipped[/yellow] {line}")
    if len(bad) > 20:
        err_console.print(f"[yellow]... and {len(bad) - 20} more skipped records[/yellow]")


def fail_if_none_ok(statuses: dict[str, int], verb: str, table: bool) -> None:
    """Exit with status 1 (the output is written by now) when there were records and none is
    ``ok``: a script must not take a job that produced nothing for a success (as ``hexamer vep``)."""
    if sum(statuses.values()) and not statuses.get("ok", 0):
        where = "in the output's error column" if table else "listed above"
        fail(f"no record was {verb} ({describe_counts(statuses)}); the reasons are {where}", code=1)
