"""``hexamer bench report``: how big a ``hexamer report`` of N scored variants is, how long it
takes to write, and how long headless Chromium takes to open it from disk and draw igv.js.

The variants are random SNVs (:func:`hexamer.synthetic.write_random_vcf`) on the 2 Mbp of real
human chr20 shipped in ``hexamer/data/dna``, given random ``HEXAMER_SCORE`` values (the page,
not the model, is measured), with two random-valued bigWig tracks embedded around each. Opening
is timed in alternating rounds against a blank page in the same Chromium (its start-up and exit),
so the difference is the report's own cost; the page's own clock (navigation start to igv.js
drawn) is recorded beside it.
"""

from __future__ import annotations

import gzip
import random
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import numpy as np

from hexamer.bench.report import BenchReport
from hexamer.bench.timing import run_rounds, spread_warning

__all__ = ["run_report_bench", "write_bench_inputs"]

_FASTA = "human_chr20_2.fa.gz"


def write_bench_inputs(
    folder: Path, n_variants: int, n_tracks: int = 2, seed: int = 0
) -> tuple[Path, Path, list[Path]]:
    """(FASTA, scored VCF, bigWigs) in ``folder``: real chr20 DNA, random SNVs and scores."""
    import pysam

    from hexamer.synthetic.vcf import write_random_vcf
    from hexamer.tracks.writers import BigWigWriter

    fasta = folder / "chr20.fa"
    shipped = resources.files("hexamer").joinpath("data", "dna", _FASTA)
    with shipped.open("rb") as f, gzip.open(f, "rt") as text:
        fasta.write_text(text.read())
    pysam.faidx(str(fasta))
    contig, length = fasta.with_name("chr20.fa.fai").read_text().split("\t")[:2]
    raw = folder / "random.vcf"
    write_random_vcf(fasta, raw, n_sites=n_variants, seed=seed)
    rng = random.Random(seed)
    lines = []
    for line in raw.read_text().splitlines():
        if line.startswith("#CHROM"):
            lines.append('##INFO=<ID=HEXAMER_SCORE,Number=A,Type=Float,Description="random (benchmark)">')
            lines.append('##INFO=<ID=HEXAMER_STATUS,Number=A,Type=String,Description="ok">')
        elif not line.startswith("#"):
            cols = line.split("\t")
            cols[7] = f"HEXAMER_SCORE={rng.gauss(0, 1):.5f};HEXAMER_STATUS=ok"
            line = "\t".join(cols)
        lines.append(line)
    vcf = folder / "scored.vcf"
    vcf.write_text("\n".join(lines) + "\n")
    tracks = []
    values = np.random.default_rng(seed).random(int(length), dtype=np.float32)
    for k in range(n_tracks):
        path = folder / f"track_{k}.bw"
        writer = BigWigWriter(path, {contig: int(length)})
        writer.write(contig, 0, values)
        writer.commit()
        tracks.append(path)
    return fasta, vcf, tracks


def run_report_bench(
    *, n_variants: int = 1_000, flank: int = 60, repeats: int = 3, log: Callable[[str], None] = lambda _: None
) -> BenchReport:
    """Write a report of ``n_variants`` and time opening it in headless Chromium (``RuntimeError``
    when none is installed)."""
    from hexamer.view.browser import find_chromium, open_page
    from hexamer.view.report import build_report

    if find_chromium() is None:
        raise RuntimeError("no chromium on PATH (apt-get install -y chromium)")
    if n_variants < 1:
        raise ValueError(f"n_variants must be >= 1, got {n_variants}")
    with tempfile.TemporaryDirectory(prefix="hexamer-bench-report-") as tmp:
        folder = Path(tmp)
        fasta, vcf, tracks = write_bench_inputs(folder, n_variants)
        out = folder / "report.html"
        start = time.perf_counter()
        result = build_report(vcf, fasta, out, tracks=tracks, flank=flank)
        build_s = time.perf_counter() - start
        blank = folder / "blank.html"
        blank.write_text("<!doctype html><title>blank</title><p>blank")
        last: dict[str, object] = {}

        def open_report() -> None:
            status = open_page(out.as_uri())
            if not status.ready or status.errors or status.offsite:
                raise RuntimeError(f"the report did not draw cleanly: {status.raw}")
            last["status"] = status

        cases = {
            f"open the report ({n_variants:,} variants)": open_report,
            "open a blank page (Chromium start-up)": lambda: open_page(blank.as_uri()),
        }
        timings = run_rounds(cases, repeats, log=log)
    status = last["status"]
    report = BenchReport(
        name="report",
        title=f"hexamer report: {n_variants:,} variants, {len(tracks)} bigWig tracks, ±{flank} bp, headless Chromium",
        columns=("case", "seconds (min / median / max)"),
    )
    for name, timing in timings.items():
        report.rows.append(
            {"case": name, "seconds (min / median / max)": timing.summary(), **timing.as_dict()}
        )
    names = list(timings)
    own = timings[names[0]].median - timings[names[1]].median
    report.notes.append(
        f"report file {result.n_bytes / 2**20:.2f} MiB ({result.n_bytes:,} bytes; igv.js inlined is "
        f"{len(_igv_bytes()) / 2**20:.2f} MiB of it), written in {build_s:.2f} s; opening it costs "
        f"{own:.2f} s over a blank page (medians); the page's own clock to igv.js drawn: {status.ms} ms"
    )
    if (warning := spread_warning(timings)) is not None:
        report.notes.append(warning)
    return report


def _igv_bytes() -> bytes:
    from hexamer.view.assets import igv_js_path

    return igv_js_path().read_bytes()
