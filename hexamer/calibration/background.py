"""The background of a calibration: every SNV of regions sampled from a FASTA, like CADD's.

Regions are drawn with a seeded ``numpy`` generator, uniformly over the bases of the FASTA
(a contig's chance is proportional to its length); a draw whose bases are mostly not A/C/G/T is
drawn again. The same FASTA, seed, number and length of regions give the same regions, so the
same model and settings give the same table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.calibration.table import Calibration, CalibrationError
from hexamer.io.reference import Reference
from hexamer.ism.mutagenesis import iter_mutagenesis
from hexamer.ism.regions import Region
from hexamer.vep.settings import VepSettings

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["MAX_REGIONS", "MAX_REGION_BP", "calibrate", "sample_regions"]

PathLike = str | os.PathLike[str]
MAX_REGIONS = 10_000
MAX_REGION_BP = 100_000
_MAX_DRAWS = 50  # draws per region before giving up on a FASTA that is mostly N


def sample_regions(reference: Reference, n_regions: int, region_bp: int, seed: int = 0) -> list[Region]:
    """``n_regions`` regions of ``region_bp`` bases (each at least half A/C/G/T), seeded, sorted."""
    if not 1 <= n_regions <= MAX_REGIONS:
        raise ValueError(f"n_regions must be between 1 and {MAX_REGIONS:,}, got {n_regions}")
    if not 1 <= region_bp <= MAX_REGION_BP:
        raise ValueError(f"region_bp must be between 1 and {MAX_REGION_BP:,}, got {region_bp}")
    contigs = [(c, n) for c, n in reference.lengths.items() if n >= region_bp]
    if not contigs:
        raise CalibrationError(f"{reference.path}: no contig holds {region_bp:,} bp; use a smaller region_bp")
    starts = np.array([n - region_bp + 1 for _, n in contigs], dtype=np.float64)
    rng = np.random.default_rng(seed)
    out: list[Region] = []
    for _ in range(n_regions):
        for _draw in range(_MAX_DRAWS):
            i = int(rng.choice(len(contigs), p=starts / starts.sum()))
            contig = contigs[i][0]
            start = int(rng.integers(0, int(starts[i])))
            seq = reference.fetch(contig, start, start + region_bp)
            if sum(seq.count(b) for b in "ACGT") * 2 >= region_bp:
                out.append(Region(contig, contig, start, start + region_bp))
                break
        else:
            raise CalibrationError(
                f"{reference.path}: {_MAX_DRAWS} draws found no region that is mostly A/C/G/T"
            )
    return sorted(out, key=lambda r: (reference.order[r.contig], r.start))


def calibrate(
    carbon: Carbon,
    fasta: PathLike,
    settings: VepSettings,
    *,
    n_regions: int = 20,
    region_bp: int = 100,
    seed: int = 0,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Calibration:
    """Score every SNV of ``n_regions`` sampled regions of ``region_bp`` bp with ``settings`` and
    make the :class:`Calibration` of their ``ok`` scores (overlapping draws are scored once each
    time they are drawn, as CADD's background counts each variant it draws)."""
    checked = settings.checked(carbon, on_note=on_note)
    with Reference(fasta) as reference:
        regions = sample_regions(reference, n_regions, region_bp, seed)
        scores: list[float] = []
        for region in regions:  # one region at a time: overlapping draws each count
            for row in iter_mutagenesis(
                carbon, reference, [region], checked, on_progress=on_progress, on_note=on_note
            ):
                if row["status"] == "ok" and row["kind"] == "SNV":
                    scores.append(float(row["score"]))
    provenance: dict[str, Any] = {
        "fasta": os.path.basename(os.fspath(fasta)),
        "seed": seed,
        "n_regions": n_regions,
        "region_bp": region_bp,
        "regions": [str(r) for r in regions],
    }
    return Calibration.from_scores(
        scores, model=carbon.backend.fingerprint(), settings=checked, provenance=provenance
    )
