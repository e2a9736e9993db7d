"""The work one Ray actor does: load the model once, then score shards sent to it.

A plain class (Ray wraps it in :class:`~hexamer.distributed.cluster.WorkerPool`), so it can be
tested and profiled without Ray.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.distributed.faults import FaultPlan
    from hexamer.io.reference import Reference
    from hexamer.io.vcf.records import VcfRecord

__all__ = ["ShardWorker"]

Row = dict[str, Any]


class ShardWorker:
    """One model copy; ``threads`` PyTorch threads (set explicitly: Ray's default of one per
    reserved CPU would be wrong for fractional CPUs). A fine-tuned head folder is loaded as a
    head (:class:`hexamer.finetune.effects.HeadVariantModel`): its VEP shards are variant effects."""

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "auto",
        device: str | None = None,
        threads: int = 1,
        batch_size: int = 8,
    ) -> None:
        import torch

        from hexamer.carbon import Carbon
        from hexamer.finetune.folders import is_head_folder

        torch.set_num_threads(threads)
        #: the head's predictor when ``model`` is a fine-tuned head folder, else None
        self.head: Any = None
        self.carbon: Any
        if os.path.isdir(model) and is_head_folder(model):
            from hexamer.finetune.apply import Predictor
            from hexamer.finetune.effects import HeadVariantModel

            head_dtype = "float32" if dtype == "auto" else dtype  # as hexamer predict loads it
            where = device or ("cuda" if torch.cuda.is_available() else "cpu")
            self.head = Predictor.load(model, dtype=head_dtype, device=where, batch_size=batch_size)
            self.carbon = HeadVariantModel(self.head)
        else:
            self.carbon = Carbon.from_pretrained(model, dtype=dtype, device=device, max_batch_size=batch_size)
        self._references: dict[tuple[str, tuple[tuple[str, str], ...]], Reference] = {}

    def describe(self) -> dict[str, Any]:
        """Where this worker runs and which model it holds (its fingerprint)."""
        return {
            "fingerprint": self.carbon.backend.fingerprint(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "device": str(self.carbon.model.device),
        }

    def cpu_seconds(self) -> float:
        """CPU time this worker process has used (user + system, all threads): what a job cost it."""
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def vep_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The settings checked against the model (a window too long is cut to fit), with notes."""
        from hexamer.vep.settings import VepSettings

        notes: list[str] = []
        checked = VepSettings(**settings).checked(self.carbon, on_note=notes.append)
        return checked.as_dict(), notes

    def _reference(self, fasta: str, renames: Mapping[str, str] | None) -> Reference:
        from hexamer.io.reference import Reference

        key = (fasta, tuple(sorted((renames or {}).items())))
        ref = self._references.get(key)
        if ref is None:
            ref = self._references[key] = Reference(fasta, renames=dict(renames) if renames else None)
        return ref

    def vep_shard(
        self,
        shard: int,
        records: Sequence[VcfRecord],
        fasta: str,
        renames: Mapping[str, str] | None,
        settings: Mapping[str, Any],
        fault: FaultPlan | None = None,
    ) -> tuple[list[Row], list[str]]:
        """The rows of a shard of VCF records, sorted by ``(record, alt_index)``, and the notes
        scoring them gave (contig renames)."""
        from hexamer.vep.scoring import iter_record_blocks
        from hexamer.vep.settings import VepSettings

        if fault is not None:
            fault.apply(shard)
        notes: list[str] = []
        make_runner = None
        if self.head is not None:  # a head's units: its effects, the rest is the VEP job's
            from hexamer.finetune.effects import EffectRunner

            make_runner = functools.partial(EffectRunner, self.head)
        blocks = iter_record_blocks(
            self.carbon,
            records,
            self._reference(fasta, renames),
            VepSettings(**settings),
            on_note=notes.append,
            make_runner=make_runner,
        )
        rows = [row for units in blocks for unit in units for row in unit]
        rows.sort(key=lambda r: (r["record"], r["alt_index"]))
        return rows, notes

    def score_shard(
        self,
        shard: int,
        records: Sequence[Any],
        options: Mapping[str, Any],
        fault: FaultPlan | None = None,
    ) -> list[tuple[list[Row], list[str], int]]:
        """``hexamer score`` rows of a shard, chunk by chunk (:data:`~hexamer.sequence_scores.SCORE_CHUNK`
        records each, as the command batches them): per chunk its rows, problems and bases scored."""
        from hexamer.sequence_scores import SCORE_CHUNK, score_record_rows

        if fault is not None:
            fault.apply(shard)
        out = []
        for at in range(0, len(records), SCORE_CHUNK):
            scored = score_record_rows(self.carbon, records[at : at + SCORE_CHUNK], **options)
            out.append((scored.rows, scored.problems, scored.scored_bp))
        return out

    def generate_shard(
        self,
        shard: int,
        records: Sequence[Any],
        settings: Mapping[str, Any],
        fault: FaultPlan | None = None,
    ) -> list[dict[str, Any]]:
        """``hexamer generate`` rows of a shard, chunk by chunk (as the command batches them): per
        chunk its rows, each record's status, the problems and the bases written."""
        from hexamer.generation_job import GenerationSettings, chunk_records, generate_record_rows

        if fault is not None:
            fault.apply(shard)
        options = GenerationSettings(**{**settings, "stop": tuple(settings.get("stop", ()))})
        size = chunk_records(options.n)
        out = []
        for at in range(0, len(records), size):
            done = generate_record_rows(self.carbon, records[at : at + size], options)
            out.append(
                {
                    "rows": done.rows,
                    "statuses": done.statuses,
                    "problems": done.problems,
                    "written_bp": done.written_bp,
                }
            )
        return out

    def embed_geometry(self, options: Mapping[str, Any]) -> tuple[Any, int, int]:
        """The tokenizer layout, DNA tokens per chunk and overlap ``embed_sequences`` uses with
        these options (the driver counts prompts with them to cut shards on group boundaries)."""
        from hexamer.embed.pooling import chunk_geometry

        _, capacity, overlap = chunk_geometry(
            self.carbon,
            max_tokens=options.get("max_tokens"),
            chunk_overlap=options.get("chunk_overlap"),
            prefix=options.get("prefix", ""),
        )
        return self.carbon.layout, capacity, overlap

    def embed_shard(
        self,
        shard: int,
        records: Sequence[Any],
        options: Mapping[str, Any],
        fault: FaultPlan | None = None,
    ) -> tuple[list[tuple[str, Any]], dict[str, str]]:
        """``(id, vector or None)`` per record of a shard (whole embedding groups), and why each
        record without a vector has none."""
        from hexamer.embed import embed_sequences

        if fault is not None:
            fault.apply(shard)
        errors: dict[str, str] = {}
        items = list(embed_sequences(self.carbon, records, on_error=errors.setdefault, **options))
        return items, errors
