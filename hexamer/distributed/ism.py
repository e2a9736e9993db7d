"""``hexamer ism`` on a Ray cluster, with the files a single-process run writes, byte for byte.

The driver makes the ISM records (cheap and deterministic: regions to VCF-like records, read
lazily) and cuts them into shards of ``shard_records`` *scored* records, a multiple of the
engine's ``block_records``: a single process plans its blocks over the scored records only (a
base that is an IUPAC code is skipped before scoring), so every shard plans the blocks and work
units one process plans, hence the same numbers. Actors score a shard's records with the VEP
engine (:meth:`~hexamer.distributed.worker.ShardWorker.vep_shard`); the driver merges them with
the shard's skipped bases into ISM rows (:func:`hexamer.ism.mutagenesis.ism_rows`), commits each
shard as it finishes (:mod:`~hexamer.distributed.store`) and at the end writes the rows, shard by
shard in input order, with the single-process writer (:func:`hexamer.ism.write_ism`).

Memory: the driver holds the shards in flight (a 50,000-record shard is a few MB of records) and
the committed shards are on disk; the final write holds every row, as one process does (a region
is at most :data:`~hexamer.ism.MAX_REGION_BP` bases).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexamer.distributed.blocks import score_blocks
from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.driver import ShardRun, check_job, pool_for, refuse_pool_keywords
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.sharding import Shard
from hexamer.distributed.store import file_identity
from hexamer.io.reference import Reference
from hexamer.io.vcf.records import VcfRecord
from hexamer.ism.mutagenesis import ISM_COLUMNS, ism_regions, ism_rows, ism_settings, placement_of
from hexamer.ism.regions import Region
from hexamer.ism.tables import ism_schema, output_format, write_ism
from hexamer.ism.variants import IsmRecord, ism_records
from hexamer.vep.settings import VepSettings

if TYPE_CHECKING:
    from hexamer.calibration.table import Calibration

__all__ = ["IsmRunResult", "ism"]

PathLike = str | os.PathLike[str]
Row = dict[str, Any]
#: the layout of the run folder; another value is another job
_FORMAT = "hexamer-ray-ism/1"


@dataclass
class IsmRunResult:
    """What :func:`ism` wrote: the rows (as :func:`hexamer.ism.saturation_mutagenesis` returns
    them, for plots), the lines or rows written, the regions scored and, in site mode, the sites
    that could not be placed; ``n_resumed`` rows came from shards a killed run had committed."""

    output: str
    rows: list[Row]
    n_written: int
    regions: list[Region]
    unplaced: list[tuple[int, str, int, str]] = field(default_factory=list)
    n_resumed: int = 0

    @property
    def status_counts(self) -> dict[str, int]:
        return dict(Counter(str(r["status"]) for r in self.rows))


def ism_shards(items: Iterable[IsmRecord], size: int) -> Iterator[Shard[IsmRecord]]:
    """Shards of ``size`` scored records each (the last may hold fewer), with the skipped bases
    between them; ``first`` is the record index of a shard's first item. A shard is cut just
    before its ``size + 1``-th scored record, so the engine blocks line up with one process's."""
    if size < 1:
        raise ValueError(f"shard size must be >= 1 record, got {size}")
    batch: list[IsmRecord] = []
    index = first = scored = 0
    for item in items:
        if item.skip is None:
            if scored == size:
                yield Shard(index, first, batch)
                index, first, batch, scored = index + 1, first + len(batch), [], 0
            scored += 1
        batch.append(item)
    if batch:
        yield Shard(index, first, batch)


def _scored_records(shard: Shard[IsmRecord]) -> list[VcfRecord]:
    """The records of a shard the engine scores (its skipped bases are not sent)."""
    return [item.record for item in shard.records if item.skip is None]


def _shard_rows(shard: Shard[IsmRecord], engine_rows: list[Row], recipe: str) -> list[Row]:
    """A shard's ISM rows: its engine rows by record, with its skipped bases in place."""
    scored: dict[int, list[Row]] = {}
    for r in engine_rows:
        scored.setdefault(r["record"], []).append(r)
    return [row for batch in ism_rows(shard.records, scored, recipe) for row in batch]


def ism(
    model: PathLike | None,
    fasta: PathLike,
    output: PathLike,
    *,
    region: str | Region | Iterable[str | Region] | None = None,
    vcf: PathLike | None = None,
    flank: int = 50,
    indels: bool = False,
    pool: WorkerPool | PoolSpec | None = None,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    calibration: Calibration | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    fault: FaultPlan | None = None,
    settings: VepSettings | None = None,
    **fields: Any,
) -> IsmRunResult:
    """Saturation mutagenesis of ``region`` (or of ``flank`` bases around each site of ``vcf``)
    on Ray actors into ``output``; the file equals the one ``hexamer ism`` writes without Ray.

    ``settings`` is a :class:`~hexamer.vep.VepSettings` (default: :func:`hexamer.ism.ism_settings`
    of the keyword ``fields``: ``recipe``, ``window``, ``window_grid``, ...). ``model`` is a model
    folder every node can read; ``pool`` is as for :func:`hexamer.distributed.run_vep` (a
    :class:`~hexamer.distributed.PoolSpec`, or a running pool). ``shard_records`` (default
    ``block_records``, 50,000) scored records go to an actor at a time, a multiple of
    ``block_records``. Finished shards are committed as they
    come; ``resume`` skips those whose checksum verifies. A shard that fails ``max_attempts``
    times becomes ``failed`` rows with the reason. ``calibration`` fills ``phred`` on the driver
    (checked against the actors' model and the settings before any scoring); ``fault`` injects
    failures (drills and tests). A bad region raises :class:`~hexamer.ism.RegionError` before
    any actor starts.
    """
    refuse_pool_keywords(fields)
    run = ShardRun(Path(output), shard_records, max_attempts, resume, fault, on_note, on_progress)
    output_format(run.out)  # an unknown extension fails now
    check_job(run.out, {"FASTA": fasta, **({"VCF": vcf} if vcf is not None else {})})
    if settings is not None and fields:
        raise TypeError(
            f"give settings=VepSettings(...) or the keywords {', '.join(sorted(fields))}, not both"
        )
    requested = settings if settings is not None else ism_settings(**fields)
    fasta_path = str(Path(fasta).resolve())
    with Reference(fasta_path) as reference:
        regions, unplaced = ism_regions(reference, region=region, vcf=vcf, flank=flank, on_note=run.note)
        job: dict[str, Any] = {"format": _FORMAT, "fasta": file_identity(fasta_path), "indels": indels}
        job["regions"] = [[r.chrom, r.contig, r.start, r.end] for r in regions]
        with pool_for(pool, model, requested.batch_size) as workers_pool:
            checked, store, feed = score_blocks(
                workers_pool,
                run,
                requested,
                calibration,
                job,
                ism_schema(),
                lambda size: ism_shards(ism_records(reference, regions, indels=indels), size),
                fasta_path,
                records_of=_scored_records,
                rows_of=_shard_rows,
            )
    placement = placement_of(checked)  # the settings the actors fitted, as one process names them
    stored = ({**r, "window_placement": placement} for r in store.rows(ISM_COLUMNS))
    rows = list(stored if calibration is None else calibration.annotate(stored))
    n_written = write_ism(run.out, rows)
    store.remove()
    return IsmRunResult(str(run.out), rows, n_written, regions, unplaced, feed.n_resumed)
