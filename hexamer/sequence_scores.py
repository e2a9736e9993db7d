"""The score batch job (``hexamer score``): one row per input record, with a status, computed a
chunk at a time.

One function computes a chunk's rows (:func:`score_record_rows`) for the single-process job
(:func:`run_scoring`) and for its scale-out (:mod:`hexamer.distributed.score`), so both compute
the same numbers for the same chunks of records.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.io import BadRecord, SequenceRecord

__all__ = [
    "SCORE_CHUNK",
    "ScoreSettings",
    "ScoredChunk",
    "ScoringResult",
    "blank_row",
    "run_scoring",
    "score_record_rows",
]

#: records per engine call in ``hexamer score`` (bounds memory on huge inputs); the batches of
#: a chunk never mix with another chunk's, so a chunk's numbers depend only on its records
SCORE_CHUNK = 256


@dataclass(frozen=True)
class ScoreSettings:
    """The options that decide a score job's rows (those of ``hexamer score``): the ``level``
    (bp or token), the ``method`` (fns or exact), the prompt ``prefix``, a ``per_base`` column,
    and ``batch_size`` (a local model's forward holds ``batch_size`` x 1,024 tokens)."""

    level: str = "bp"
    method: str = "fns"
    prefix: str = ""
    per_base: bool = False
    batch_size: int = 16

    def as_dict(self) -> dict[str, Any]:
        """The keywords of :func:`score_record_rows` and :func:`hexamer.distributed.score`."""
        return asdict(self)


@dataclass
class ScoringResult:
    """A finished job: records per status, the problems met, the bases scored, and the rows
    themselves when no output file was given (the caller prints them)."""

    output: str | None
    n_records: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    scored_bp: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ScoredChunk:
    """The rows of a chunk of records (in input order), the problems to report, and the bases scored."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    scored_bp: int = 0


def blank_row(ident: str, status: str, error: str, per_base: bool) -> dict[str, Any]:
    """A record's row before (or without) any score: the columns of ``hexamer score``, in order."""
    row: dict[str, Any] = {
        "id": ident,
        "status": status,
        "error": error,
        "length": 0,
        "mean_logprob": None,
        "n_scored": 0,
        "n_oov_bases": 0,
    }
    if per_base:
        row["per_base_logprob"] = None
    return row


def score_record_rows(
    carbon: Carbon,
    records: Sequence[SequenceRecord | BadRecord],
    *,
    level: str = "bp",
    method: str = "fns",
    prefix: str = "",
    per_base: bool = False,
    batch_size: int = 16,
) -> ScoredChunk:
    """Score a chunk of records (at most :data:`SCORE_CHUNK` for ``hexamer score``'s batches):
    a row per record with ``status`` ok, skipped (a bad record, nothing scorable) or failed (a
    sequence the model cannot take, a non-finite model output), ``error``, ``length``, ``mean_logprob``, ``n_scored``,
    ``n_oov_bases`` and, with ``per_base``, ``per_base_logprob``. ``batch_size`` x 1,024 tokens
    bound a local model's forward, and the prompt tokens in flight to a served one."""
    from hexamer.backend.results import FailedResultWarning, UnscoredSequenceWarning
    from hexamer.io import BadRecord, normalize_sequence

    out = ScoredChunk()
    todo: list[tuple[dict[str, Any], str, int]] = []
    for rec in records:
        row = blank_row(rec.id, "ok", "", per_base)
        if isinstance(rec, BadRecord):
            row.update(status="skipped", error=rec.reason)
            out.problems.append(str(rec))
        else:
            seq = normalize_sequence(rec.sequence)
            row["length"] = len(seq)
            try:
                carbon.check_sequence(seq, prefix=prefix)
                todo.append((row, seq, rec.index))
            except ValueError as exc:
                row.update(status="failed", error=str(exc).replace("sequence 0", "sequence"))
                out.problems.append(f"record {rec.index} ({rec.id!r}): {row['error']}")
        out.rows.append(row)
    if todo:
        with warnings.catch_warnings():  # unscored and failed rows get a status, not a warning
            warnings.simplefilter("ignore", UnscoredSequenceWarning)
            warnings.simplefilter("ignore", FailedResultWarning)
            results = carbon.score(
                [s for _, s, _ in todo],
                level=level,  # type: ignore[arg-type]
                method=method,  # type: ignore[arg-type]
                prefix=prefix,
                token_budget=batch_size * 1024,
            )
        for (row, seq, index), res in zip(todo, results, strict=True):
            row.update(mean_logprob=res.mean, n_scored=res.n_scored, n_oov_bases=res.n_oov_bases)
            if res.status != "ok":  # nothing scorable, or a non-finite model output: no number to report
                row.update(
                    status="failed" if res.status == "failed" else "skipped",
                    error=res.reason,
                    mean_logprob=None,
                )
                out.problems.append(f"record {index + 1} ({row['id']!r}): {res.reason}")
            if per_base:
                row["per_base_logprob"] = res.per_base if res.per_base is not None else res.per_token
            out.scored_bp += len(seq)
    return out


def run_scoring(
    carbon: Carbon,
    records: Iterable[SequenceRecord | BadRecord],
    output: str | os.PathLike[str] | None,
    settings: ScoreSettings,
    *,
    on_progress: Callable[[int], None] | None = None,
    on_bases: Callable[[int], None] | None = None,
) -> ScoringResult:
    """The whole job in this process: every record scored, :data:`SCORE_CHUNK` at a time, and
    written to the table ``output`` atomically (None: the rows are returned in the result).
    ``on_progress`` hears the records done and ``on_bases`` the bases scored, after each chunk."""
    from hexamer.batching import batched
    from hexamer.job_output import JobOutput

    table = JobOutput(output) if output is not None else None
    result = ScoringResult(output=None if output is None else os.fspath(output))
    statuses: Counter[str] = Counter()
    try:
        for chunk in batched(records, SCORE_CHUNK):
            scored = score_record_rows(carbon, chunk, **settings.as_dict())
            result.problems.extend(scored.problems)
            result.scored_bp += scored.scored_bp
            statuses.update(r["status"] for r in scored.rows)
            if table is not None:
                table.add(scored.rows, None)
            else:
                result.rows.extend(scored.rows)
            if on_bases is not None:
                on_bases(scored.scored_bp)
            if on_progress is not None:
                on_progress(len(scored.rows))
    except BaseException:
        if table is not None:
            table.abort()
        raise
    if table is not None:
        table.close()
    result.status_counts = dict(statuses)
    result.n_records = sum(statuses.values())
    return result
