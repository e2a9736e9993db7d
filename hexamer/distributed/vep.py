"""``hexamer vep`` on a Ray cluster, with the output a single-process run writes, byte for byte.

The driver streams the VCF into shards of whole engine blocks (``shard_records``, a multiple of
``block_records``), so every shard plans the same blocks and work units, hence the same numbers,
as :func:`hexamer.vep.run_vep`. Actors score shards; the driver commits each as it finishes
(:mod:`~hexamer.distributed.store`) and, at the end, streams the shards in input order through
the same writer (:func:`~hexamer.vep.output.write_vep_output`) with the same provenance.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hexamer.distributed.blocks import score_blocks
from hexamer.distributed.cluster import PoolSpec, WorkerPool
from hexamer.distributed.driver import ShardRun, pool_for, refuse_pool_keywords
from hexamer.distributed.faults import FaultPlan
from hexamer.distributed.sharding import Shard, shards_of
from hexamer.distributed.store import run_folder
from hexamer.io.contigs import read_rename_file
from hexamer.io.vcf.reader import WriterView, read_vcf
from hexamer.io.vcf.records import VcfRecord
from hexamer.vep.checkpoint import input_identity
from hexamer.vep.job import VepRunResult, check_job_paths, write_job_output
from hexamer.vep.rows import row_schema
from hexamer.vep.scoring import settings_from
from hexamer.vep.settings import ROW_COLUMNS, VepSettings
from hexamer.vep.table_output import keep_info, resolve_info_fields

if TYPE_CHECKING:
    from hexamer.calibration.table import Calibration

__all__ = ["SCALE_OUT_OPTIONS", "run_vep", "single_process_command"]

PathLike = str | os.PathLike[str]
#: the layout of the run folder; another value is another job
#: (2: inputs identified by size, mtime and sampled bytes, :func:`~hexamer.vep.checkpoint.input_identity`)
_FORMAT = "hexamer-ray-vep/2"
#: the data lines of a text VCF input, copied by the pass that reads the records, for the writer
_BODY = "records.vcf"
#: the chosen INFO values of its records, kept by that pass for a table's ``info_*`` columns
_INFO = "info.jsonl"
#: CLI options that say where a job runs, not what it computes: left out of ``##hexamer_command``
#: so the output equals the single-process run's (value-taking options first)
SCALE_OUT_OPTIONS = ("--ray", "--workers", "--shard-records", "--num-gpus-per-worker")


def single_process_command(argv: Sequence[str] | None = None) -> str:
    """This process's command line without the scale-out options (they do not change the output)."""
    args = list(sys.argv if argv is None else argv) or ["python"]
    if os.path.basename(args[0]) in ("hexamer", "__main__.py"):
        args[0] = "hexamer"
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in SCALE_OUT_OPTIONS:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return shlex.join(kept)


def run_vep(
    model: PathLike | None,
    vcf: PathLike,
    fasta: PathLike,
    output: PathLike,
    *,
    pool: WorkerPool | PoolSpec | None = None,
    shard_records: int | None = None,
    max_attempts: int = 3,
    resume: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    renames: PathLike | Mapping[str, str] | None = None,
    info_fields: str | Sequence[str] | None = None,
    command: str | None = None,
    fault: FaultPlan | None = None,
    settings: VepSettings | None = None,
    calibration: Calibration | None = None,
    extra_columns: Mapping[str, str] | None = None,
    **fields: Any,
) -> VepRunResult:
    """Score a VCF into ``output`` on Ray actors; the output equals :func:`hexamer.vep.run_vep`'s.

    ``model`` is a model folder every node can read (or a hub id), loaded by a pool of actors
    started for this job as ``pool`` says (a :class:`~hexamer.distributed.PoolSpec`: workers,
    cluster address, threads, CPUs, GPUs, dtype, device; None: ``PoolSpec()``); ``pool`` may
    instead be a running :class:`~hexamer.distributed.WorkerPool`, reused (``model`` unused).
    ``shard_records`` (default: ``block_records``, 50,000) records go to an actor at a time; it
    must be a multiple of ``block_records`` so shards plan the blocks a single process plans.
    Finished shards are committed as they come (:mod:`~hexamer.distributed.store`); ``resume``
    skips those whose checksum verifies. A shard that fails ``max_attempts`` times becomes
    ``failed`` rows with the reason. ``command`` is the ``##hexamer_command`` provenance
    (default: this process's command line without the scale-out options). ``settings`` (or
    its fields as keywords), ``calibration``, ``renames``, ``info_fields``, ``on_progress`` and ``on_note`` are as for
    :func:`hexamer.vep.run_vep`; ``fault`` injects failures (drills and tests). ``extra_columns``
    (``column -> description``) are the float columns a fine-tuned head's rows carry (the actors
    load a head folder as a head: :func:`hexamer.distributed.effects.run_effects`).
    """
    refuse_pool_keywords(fields)
    run = ShardRun(Path(output), shard_records, max_attempts, resume, fault, on_note, on_progress)
    kind = check_job_paths(vcf, fasta, run.out)
    requested = settings_from(settings, fields)
    info = resolve_info_fields(vcf, info_fields) if info_fields and kind == "table" else None
    renames = read_rename_file(renames) if isinstance(renames, str | os.PathLike) else renames
    fasta_path = str(Path(fasta).resolve())
    read_vcf(vcf).close()  # a bad header fails now, before any actor starts
    # inputs as the single-process job knows them (size, mtime, sampled bytes): not read through
    job: dict[str, Any] = {"format": _FORMAT, "vcf": input_identity(vcf), "fasta": input_identity(fasta_path)}
    job["command"] = command or single_process_command()
    if renames:
        job["renames"] = dict(sorted(renames.items()))
    extra = dict(extra_columns or {})
    if extra:
        job["extra_columns"] = list(extra)
    view = WriterView() if kind == "vcf" else None
    with contextlib.ExitStack() as stack:

        def shards(size: int) -> Iterator[Shard[VcfRecord]]:
            """The one pass over the records (every run reads them all, resumed or not); for a
            VCF output it keeps what the writer needs, its lines in the run folder."""
            if view is not None:  # called once the run folder holds this job
                view.body = stack.enter_context(open(run_folder(run.out) / _BODY, "wb"))
            records = read_vcf(vcf, view=view, keep_records=bool(info))
            if info:  # and the INFO values a table's columns take
                sink = stack.enter_context(open(run_folder(run.out) / _INFO, "wb"))
                records = keep_info(records, info, sink)
            return shards_of(records, size)

        workers_pool = stack.enter_context(pool_for(pool, model, requested.batch_size))
        checked, store, feed = score_blocks(
            workers_pool, run, requested, calibration, job, row_schema(extra), shards, fasta_path, renames
        )
    return write_job_output(
        run.out,
        vcf,
        store.rows([*ROW_COLUMNS, *extra]),
        checked,
        model=workers_pool.fingerprint,
        command=str(store.meta.get("command") or job["command"]),
        contigs=store.contigs() if kind == "vcf" else None,
        info=info,
        calibration=calibration,
        note=run.note,
        n_resumed=feed.n_resumed,
        clean_up=store.remove,
        extra_columns=extra,
        source=view,
        info_kept=run_folder(run.out) / _INFO if info else None,
    )
