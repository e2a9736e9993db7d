"""The generate batch job (``hexamer generate``): records, in chunks, continued by
:meth:`Carbon.generate <hexamer.carbon.Carbon.generate>`, one row per record and sample, written
as a FASTA (the good records) or a table (every record, with its status).

One function computes a chunk's rows (:func:`generate_record_rows`) for the single-process job
(:func:`run_generation`) and for its scale-out (:mod:`hexamer.distributed.generate`): both see the
same chunks of records, and with a seed each sample draws from its own stream (``seed + i * n + j``
for sample ``j`` of record ``i``), so both write the same bytes.

A bad record never stops the job: it gets a ``skipped`` (unreadable) or ``failed`` (the model
cannot take it, or its output turned non-finite) row, with the reason.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hexamer.batching import batched

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.engine.spec_config import SpecStats
    from hexamer.io import BadRecord, SequenceRecord

__all__ = [
    "GENERATE_CHUNK",
    "MAX_SAMPLES",
    "GeneratedChunk",
    "GenerationResult",
    "GenerationSettings",
    "chunk_records",
    "failed_rows",
    "generate_record_rows",
    "run_generation",
]

#: sequences per engine call (records x samples): bounds memory on huge inputs
GENERATE_CHUNK = 256
#: largest ``n``: samples per prompt (the server's default limit is 64)
MAX_SAMPLES = 1024

Row = dict[str, Any]


def chunk_records(n: int) -> int:
    """Records per engine call when each has ``n`` samples (a chunk's rows depend only on its records)."""
    return max(1, GENERATE_CHUNK // n)


@dataclass(frozen=True)
class GenerationSettings:
    """Every option that decides a generate job's rows: the sampling options of
    :meth:`Carbon.generate <hexamer.carbon.Carbon.generate>`, samples per record (``n``), ``stop``
    strings, the ``logprobs`` column, the base ``seed`` (None: unseeded), the prompt ``prefix``
    and, for a served model only, where it samples (``sampler``; None for a local model)."""

    max_bp: int = 1000
    mode: str = "bp"
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    n: int = 1
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    seed: int | None = None
    mask: str | None = None
    prefix: str = ""
    sampler: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.n <= MAX_SAMPLES:
            raise ValueError(f"n must be between 1 and {MAX_SAMPLES}, got {self.n}")
        for value in self.stop:
            if not value or not set(value.upper()) <= set("ACGT"):
                raise ValueError(f"a stop string must be a non-empty string of A/C/G/T, got {value!r}")
        object.__setattr__(self, "stop", tuple(value.upper() for value in self.stop))

    def sampling(self) -> dict[str, Any]:
        """The keywords of ``Carbon.generate`` these settings set (an option at its off value is left out)."""
        options: dict[str, Any] = {
            "max_bp": self.max_bp,
            "mode": self.mode,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "mask": self.mask,
        }
        for name, off in (("top_k", 0), ("min_p", 0.0), ("repetition_penalty", 1.0)):
            if getattr(self, name) != off:
                options[name] = getattr(self, name)
        if self.sampler is not None:
            options["sampler"] = self.sampler
        return options

    def checks(self) -> dict[str, Any]:
        """What each prompt is checked with (``Carbon.check_prompt``): a served model also checks
        that its sampler can give log-probabilities."""
        options = self.sampling()
        return options if self.sampler is None else {**options, "logprobs": self.logprobs}

    def as_dict(self) -> dict[str, Any]:
        """The settings as plain values (JSON: a run folder's job, an actor's message)."""
        return {**asdict(self), "stop": list(self.stop)}


@dataclass
class GeneratedChunk:
    """A chunk's output rows (one per record and sample, in input order), each record's status,
    the problems to report, and the bases generated and written (after ``stop`` cuts)."""

    rows: list[Row] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    written_bp: int = 0
    n_prompts: int = 0  # records sent to the model (0: no generate call)


@dataclass
class GenerationResult:
    """A finished job: records per status (a record has ``n`` sample rows), the problems met, the
    bases written, and the speculative-decoding totals when a draft model was used."""

    output: str | None
    n_records: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    written_bp: int = 0
    spec_stats: SpecStats | None = None
    n_resumed: int = 0


def generate_record_rows(
    carbon: Carbon,
    records: Sequence[SequenceRecord | BadRecord],
    settings: GenerationSettings,
    *,
    speculative: dict[str, Any] | None = None,
    on_bases: Callable[[int], None] | None = None,
) -> GeneratedChunk:
    """Continue a chunk of records (at most :func:`chunk_records` for the job's batches): ``n``
    rows per record with ``status``, ``error``, ``sequence``, ``n_bp``, ``finish_reason``,
    ``n_prompt_oov_bases`` (and ``sample`` when ``n > 1``, ``logprobs`` with ``settings.logprobs``).
    ``speculative`` holds ``draft`` and ``num_speculative`` (a local model only); ``on_bases``
    hears the bases generated as they come."""
    from hexamer.backend.results import FailedResultWarning

    out = GeneratedChunk()
    rows = [_record_row(carbon, rec, settings, out.problems) for rec in records]
    ok_rows = [r for r in rows if r["status"] == "ok"]
    out.n_prompts = len(ok_rows)
    if ok_rows:
        n = settings.n
        with warnings.catch_warnings():  # a failed generation is a failed row
            warnings.simplefilter("ignore", FailedResultWarning)
            gens = carbon.generate(
                [r["prompt"] for r in ok_rows],
                seed=[r["seed"] for r in ok_rows] if settings.seed is not None else None,
                prefix=settings.prefix,
                on_progress=on_bases,
                n=n,
                stop=list(settings.stop) or None,
                logprobs=settings.logprobs,
                **settings.sampling(),
                **(speculative or {}),
            )
        for i, row in enumerate(ok_rows):  # the n samples of a prompt come together
            row["gens"] = gens[i * n : (i + 1) * n]
            failed = next((g for g in row["gens"] if g.status != "ok"), None)
            if failed is not None:  # each sample row has its own status; the record fails
                row.update(status="failed", error=failed.reason)
                out.problems.append(f"record {row['id']!r}: {failed.reason}")
    out.statuses = [row["status"] for row in rows]
    out.rows = _sample_rows(rows, settings.n, settings.logprobs)
    out.written_bp = sum(r["n_bp"] for r in out.rows)
    return out


def run_generation(
    carbon: Carbon,
    records: Iterable[SequenceRecord | BadRecord],
    output: str | os.PathLike[str] | None,
    settings: GenerationSettings,
    *,
    speculative: dict[str, Any] | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_bases: Callable[[int], None] | None = None,
) -> GenerationResult:
    """The whole job in this process: every record continued, chunk by chunk, and written to
    ``output`` (FASTA or a table by extension; None: FASTA on standard output), atomically.
    ``on_progress`` hears the records done after each chunk, ``on_bases`` the bases generated."""
    from hexamer.job_output import JobOutput

    output_file = JobOutput(output)
    statuses: Counter[str] = Counter()
    result = GenerationResult(output=None if output is None else os.fspath(output))
    if speculative:
        from hexamer.engine.spec_config import SpecStats

        result.spec_stats = SpecStats()
    try:
        for chunk in batched(records, chunk_records(settings.n)):
            done = generate_record_rows(carbon, chunk, settings, speculative=speculative, on_bases=on_bases)
            if done.n_prompts and result.spec_stats is not None and carbon.last_spec_stats is not None:
                result.spec_stats.merge(carbon.last_spec_stats)
            statuses.update(done.statuses)
            result.problems.extend(done.problems)
            result.written_bp += done.written_bp
            output_file.add(done.rows, "sequence")
            if on_progress is not None:
                on_progress(len(done.statuses))
    except BaseException:
        output_file.abort()
        raise
    output_file.close()
    result.status_counts = dict(statuses)
    result.n_records = sum(statuses.values())
    return result


def failed_rows(records: Sequence[Any], reason: str, settings: GenerationSettings) -> GeneratedChunk:
    """The rows of records none of whose samples could be made (a scale-out shard that kept
    failing): every record and sample appears, with status ``failed`` and the reason."""
    rows = [{**_blank_row(rec.id, None), "status": "failed", "error": reason} for rec in records]
    return GeneratedChunk(
        rows=_sample_rows(rows, settings.n, settings.logprobs), statuses=["failed"] * len(rows)
    )


def _blank_row(ident: str, seed: int | None) -> Row:
    return {
        "id": ident,
        "status": "ok",
        "error": "",
        "sequence": "",
        "n_bp": 0,
        "finish_reason": "",
        "n_prompt_oov_bases": 0,
        "prompt": "",
        "seed": seed,
    }


def _record_row(
    carbon: Carbon, rec: SequenceRecord | BadRecord, settings: GenerationSettings, problems: list[str]
) -> Row:
    """A record's row before generation: its prompt when the model takes it, else why not."""
    from hexamer.io import BadRecord, normalize_sequence

    seed = None if settings.seed is None else settings.seed + rec.index * settings.n  # sample j: + j
    row = _blank_row(rec.id, seed)
    if isinstance(rec, BadRecord):
        row.update(status="skipped", error=rec.reason)
        problems.append(str(rec))
        return row
    prompt = normalize_sequence(rec.sequence)
    try:
        carbon.check_prompt(prompt, prefix=settings.prefix, **settings.checks())
        row["prompt"] = prompt
    except ValueError as exc:
        row.update(status="failed", error=str(exc).removeprefix("prompt 0: "))
        problems.append(f"record {rec.index} ({rec.id!r}): {row['error']}")
    return row


def _sample_rows(rows: list[Row], n: int, logprobs: bool) -> list[Row]:
    """The output rows of a chunk's records: one per record and sample, every record's samples
    included, a skipped or failed record's too (with its status and error)."""
    import numpy as np

    out: list[Row] = []
    for row in rows:
        row.pop("prompt")
        row.pop("seed")
        gens = row.pop("gens", None) or [None] * n
        for j, gen in enumerate(gens):
            sample = {"id": row["id"], **({"sample": j} if n > 1 else {}), **row}
            if logprobs:  # typed even when empty: a Parquet column's type is set by its first batch
                sample["logprobs"] = np.zeros(0, dtype=np.float64)
            if gen is not None and gen.status != "ok":  # the model's output turned NaN/inf
                sample.update(status="failed", error=gen.reason, finish_reason=gen.finish_reason)
            elif gen is not None:
                sample.update(
                    status="ok",
                    error="",
                    sequence=gen.sequence,
                    n_bp=gen.n_bp,
                    finish_reason=gen.finish_reason,
                    n_prompt_oov_bases=gen.n_prompt_oov_bases,
                )
                if logprobs and gen.logprobs is not None:
                    sample["logprobs"] = gen.logprobs
            out.append(sample)
    return out
