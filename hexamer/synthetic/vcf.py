"""Synthetic VCFs for tests, benchmarks and the demo: random SNVs on a real reference."""

from __future__ import annotations

import os
import random

from hexamer.io.reference import Reference

__all__ = ["add_vcf_records", "write_random_vcf"]

PathLike = str | os.PathLike[str]


def write_random_vcf(
    fasta: PathLike,
    path: PathLike,
    *,
    n_sites: int,
    alts_per_site: int = 1,
    region: tuple[str, int, int] | None = None,
    seed: int = 0,
) -> int:
    """Write a sorted VCF of random SNV sites (``alts_per_site`` of the 3 possible ALTs each) on
    A/C/G/T reference bases of ``region`` (contig, 0-based start, end; default the first contig).
    For benchmarks and tests; returns the number of records."""
    if not 1 <= alts_per_site <= 3:
        raise ValueError(f"alts_per_site must be 1..3, got {alts_per_site}")
    rng = random.Random(seed)
    with Reference(fasta) as ref:
        contig, start, end = region or (next(iter(ref.lengths)), 0, next(iter(ref.lengths.values())))
        seq = ref.fetch(contig, start, end)
        length = ref.lengths[contig]
    candidates = [i for i, b in enumerate(seq) if b in "ACGT"]
    if n_sites > len(candidates):
        raise ValueError(f"region has {len(candidates)} A/C/G/T bases, fewer than n_sites={n_sites}")
    picks = sorted(rng.sample(candidates, n_sites))
    lines = [
        "##fileformat=VCFv4.2",
        f"##contig=<ID={contig},length={length}>",
        "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO",
    ]
    for i in picks:
        base = seq[i]
        alts = rng.sample([b for b in "ACGT" if b != base], alts_per_site)
        lines.append(f"{contig}\t{start + i + 1}\tv{start + i + 1}\t{base}\t{','.join(alts)}\t.\t.\t.")
    from hexamer.io import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(picks)


def add_vcf_records(path: PathLike, other: PathLike) -> None:
    """Append ``other``'s records to the VCF at ``path``, and its ``##contig`` lines but the first
    to the header: random sites mixed with hand-written edge cases make one test job."""
    with open(path) as f:
        lines = f.read().splitlines()
    with open(other) as f:
        more = f.read().splitlines()
    head = [line for line in lines if line.startswith("##")]
    body = [line for line in lines if not line.startswith("##")]
    contigs = [line for line in more if line.startswith("##") and "contig" in line]
    records = [line for line in more if not line.startswith("#")]
    with open(path, "w") as f:
        f.write("\n".join([*head, *contigs[1:], *body, *records]) + "\n")
