"""``hexamer bench scaleout``: the VEP pipeline in one process against Ray with 1 and 2 workers.

Same input, same settings, same threads per model copy (one): the single-process
:func:`hexamer.vep.run_vep` and :func:`hexamer.distributed.run_vep` on a pool of one and of two
single-thread actors, timed in alternating rounds after a warm-up
(:func:`~hexamer.bench.timing.run_rounds`). The actors are started once, outside the timed rounds
(their start-up, model loading included, is reported apart), so the figures are the steady-state
cost of sharding, shipping records and rows, committing shards and merging. Every run's output is
compared byte for byte with the single-process file.

    from hexamer.bench.scaleout import bench_scaleout
    print(bench_scaleout("path/to/model", "ref.fa.gz", sites=64).to_markdown())
"""

from __future__ import annotations

import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hexamer.bench.report import BenchReport
from hexamer.bench.timing import Timing, run_rounds, spread_warning

__all__ = ["bench_scaleout"]

PathLike = str | os.PathLike[str]


def _driver_cpu() -> float:
    """CPU time of this (driver) process, all threads, Ray's client threads included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_now(pool: Any) -> float | None:
    """Driver + actors CPU seconds, or None when an actor cannot answer (it was just killed)."""
    try:
        return _driver_cpu() + pool.cpu_seconds()
    except Exception:
        return None


def _median_cpu(values: list[float]) -> float:
    kept = [v for v in values if v == v]  # rounds whose count a restart broke are left out
    return statistics.median(kept) if kept else float("nan")


def _write_sites(fasta: PathLike, vcf: Path, sites: int, alts_per_site: int) -> None:
    """Random SNVs in the first 400 kb of the reference's first contig."""
    from hexamer.io.reference import Reference
    from hexamer.synthetic.vcf import write_random_vcf

    with Reference(fasta) as ref:
        contig, length = next(iter(ref.lengths.items()))
    write_random_vcf(
        fasta, vcf, n_sites=sites, alts_per_site=alts_per_site, region=(contig, 0, min(length, 400_000))
    )


def _counting_cpu(
    cases: dict[str, Callable[[], Any]], pool: Any
) -> tuple[dict[str, Callable[[], Any]], dict[str, list[float]]]:
    """The cases, each also recording the CPU seconds (driver + actors) of every run it makes into
    the returned lists (NaN for a run during which an actor restarted)."""
    cpu: dict[str, list[float]] = {name: [] for name in cases}

    def with_cpu(name: str, run: Callable[[], Any]) -> Callable[[], Any]:
        def case() -> Any:
            before = _cpu_now(pool)
            result = run()
            after = _cpu_now(pool)
            # a restarted actor (killed, e.g. by Ray's memory monitor) starts its count again
            cpu[name].append(after - before if before is not None and after is not None else float("nan"))
            return result

        return case

    return {name: with_cpu(name, run) for name, run in cases.items()}, cpu


def _scaleout_report(title: str, timings: dict[str, Timing], cpu: dict[str, list[float]]) -> BenchReport:
    """One row per pipeline: wall time (rounds), variants/s and CPU seconds, each against the
    single process (CPU medians over the timed rounds only, not the warm-up)."""
    n_rows = timings["single process"].result.n_rows
    base = timings["single process"].median
    base_cpu = _median_cpu(cpu["single process"][-len(timings["single process"].seconds) :])
    report = BenchReport(
        name="scaleout",
        title=title,
        columns=[
            "pipeline",
            "workers",
            "variants",
            "seconds (min / median / max)",
            "variants/s",
            "× single",
            "CPU s (median)",
            "CPU × single",
        ],
        formats={
            "variants/s": "{:,.1f}",
            "× single": "{:.2f}×",
            "CPU s (median)": "{:.2f}",
            "CPU × single": "{:.3f}×",
        },
    )
    for name, workers in (("single process", 0), ("ray, 1 worker", 1), ("ray, 2 workers", 2)):
        t = timings[name]
        report.rows.append(
            {
                "pipeline": name,
                "workers": workers or "-",
                "variants": n_rows,
                "seconds (min / median / max)": t.summary(),
                "variants/s": n_rows / t.median,
                "× single": base / t.median,
                "CPU s (median)": _median_cpu(cpu[name][-len(t.seconds) :]),
                "CPU × single": _median_cpu(cpu[name][-len(t.seconds) :]) / base_cpu,
            }
        )
    return report


def _scaleout_notes(report: BenchReport, timings: dict[str, Timing], same: bool, startup: float) -> None:
    """Overhead at 1 worker, scaling at 2, byte identity, actor start-up, and the spread warning."""
    base = timings["single process"].median
    ray1 = timings["ray, 1 worker"].median
    ray2 = timings["ray, 2 workers"].median
    cpu1 = report.rows[1]["CPU × single"]
    report.notes.append(
        f"overhead at 1 worker: {ray1 / base - 1:+.1%} of the single-process time; {cpu1 - 1:+.1%} in CPU "
        "seconds (driver + actors; Ray's own raylet/GCS processes not counted), the steadier figure on a busy machine"
    )
    report.notes.append(
        f"scaling at 2 workers: {ray1 / ray2:.2f}× the 1-worker rate (efficiency {ray1 / ray2 / 2:.0%}), "
        f"{base / ray2:.2f}× the single process, on {os.cpu_count()} cores"
    )
    report.notes.append(f"outputs byte-identical to the single-process file: {'yes' if same else 'NO'}")
    report.notes.append(
        f"start-up of the 2 actors (model loaded in each), not in the rounds: {startup:.1f} s"
    )
    warning = spread_warning(timings)
    if warning:
        report.notes.append(warning)


def bench_scaleout(
    model: PathLike,
    fasta: PathLike,
    *,
    sites: int = 96,
    alts_per_site: int = 1,
    window: int = 1200,
    block_records: int = 8,
    shard_records: int = 8,
    rounds: int = 3,
    address: str | None = "auto",
    log: Any = None,
) -> BenchReport:
    """Variants/s of the single-process pipeline and of Ray with 1 and 2 single-thread workers.

    ``block_records``/``shard_records`` make several shards of a small input (the single-process
    run uses the same ``block_records``, so all three compute the same work units)."""
    import torch

    from hexamer.carbon import Carbon
    from hexamer.distributed import PoolSpec, WorkerPool, connect
    from hexamer.distributed import run_vep as run_on_ray
    from hexamer.vep import run_vep

    settings: dict[str, Any] = {"recipe": "window", "window": window, "batch_size": 8}
    settings["block_records"] = block_records
    torch.set_num_threads(1)  # one thread per model copy, as each actor
    carbon = Carbon.from_pretrained(model, max_batch_size=settings["batch_size"])
    connect(address)
    started = time.perf_counter()
    pool = WorkerPool(
        model, PoolSpec(workers=2, address=address, threads=1), batch_size=settings["batch_size"]
    )
    startup = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="hexamer-scaleout-") as tmp, pool:
        vcf = Path(tmp) / "sites.vcf"
        _write_sites(fasta, vcf, sites, alts_per_site)
        outs = {name: Path(tmp) / name / "out.tsv" for name in ("single", "ray1", "ray2")}
        for out in outs.values():
            out.parent.mkdir()
        quiet = {"on_note": lambda _: None}
        one = pool.limited(1)
        cases, cpu = _counting_cpu(
            {
                "single process": lambda: run_vep(carbon, vcf, fasta, outs["single"], **quiet, **settings),
                "ray, 1 worker": lambda: run_on_ray(
                    None, vcf, fasta, outs["ray1"], pool=one, shard_records=shard_records, **quiet, **settings
                ),
                "ray, 2 workers": lambda: run_on_ray(
                    None,
                    vcf,
                    fasta,
                    outs["ray2"],
                    pool=pool,
                    shard_records=shard_records,
                    **quiet,
                    **settings,
                ),
            },
            pool,
        )
        timings = run_rounds(cases, rounds, log=log)
        same = all(outs[n].read_bytes() == outs["single"].read_bytes() for n in ("ray1", "ray2"))
    title = (
        f"VEP on Ray vs one process ({sites} sites, window {window} bp, {Path(model).name}, "
        f"shards of {shard_records} records)"
    )
    report = _scaleout_report(title, timings, cpu)
    _scaleout_notes(report, timings, same, startup)
    return report
