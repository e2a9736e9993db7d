"""A simulated regression task on real human DNA, for the fine-tuning demo, tutorial and tests.

Windows of the shipped GRCh37 chr20 slice (``hexamer/data/dna/human_chr20_2.fa.gz``) get 0-3
copies of the AP-1 site ``TGACTCA`` written over random positions; the label ``activity`` is the
number of copies plus Gaussian noise (s.d. 0.3), ``has_motif`` whether any copy was planted, and
``gc`` the window's GC fraction. The DNA is real, the labels are simulated: a model that counts the
motif scores well, and nothing here says anything about real regulatory activity. The ``chrom``
column is a label assigned round-robin (``1 2 7 13 19 X``) so that chromosome splits can be
shown; every window comes from chr20.

``python -m hexamer.demo.motif_task OUT.tsv --n 2000 --length 120 --seed 5`` writes the table of
docs/finetune.md's tutorial (the same rows on every machine: a seeded draw).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

from hexamer.io import atomic_path

__all__ = ["CHROMS", "MOTIF", "motif_task", "write_motif_table"]

MOTIF = "TGACTCA"
#: the chromosome label of row ``i`` is ``CHROMS[i % 6]`` (round-robin; the DNA is all chr20)
CHROMS = ("1", "2", "7", "13", "19", "X")
_GENOME = "human_chr20_2.fa.gz"


def _genome() -> str:
    import pysam

    from hexamer.demo.paths import demo_data_files

    path = next((p for p in demo_data_files() if p.name == _GENOME), None)
    if path is None:
        raise FileNotFoundError(f"the shipped DNA file {_GENOME} is missing from this installation")
    with pysam.FastxFile(str(path)) as fx:
        return next(iter(fx)).sequence


def motif_task(n: int, length: int = 120, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(sequences, activity, has_motif)`` for ``n`` distinct windows of ``length`` bp."""
    if n < 1 or length < len(MOTIF) + 3:
        raise ValueError(f"need n >= 1 and length >= {len(MOTIF) + 3}, got n={n}, length={length}")
    genome = _genome()
    windows = len(genome) // length - 1
    if n > windows:
        raise ValueError(f"the shipped chr20 slice holds {windows} windows of {length} bp, not {n}")
    rng = np.random.default_rng(seed)
    starts = rng.choice(windows, size=n, replace=False) * length
    seqs, counts = [], np.zeros(n, dtype=np.int64)
    for i, s in enumerate(starts):
        seq = list(genome[s : s + length])
        counts[i] = rng.integers(0, 4)
        for pos in rng.choice(length - len(MOTIF), size=counts[i], replace=False):
            seq[pos : pos + len(MOTIF)] = MOTIF
        seqs.append("".join(seq[:length]))
    activity = counts + rng.normal(0, 0.3, n)
    return seqs, activity, (counts > 0).astype(np.int64)


def write_motif_table(path: str | os.PathLike[str], n: int = 2000, length: int = 120, seed: int = 5) -> Path:
    """The task as a TSV table (``id chrom sequence activity has_motif gc``), written atomically."""
    seqs, activity, has = motif_task(n, length=length, seed=seed)
    lines = ["id\tchrom\tsequence\tactivity\thas_motif\tgc"]
    for i, (s, a, h) in enumerate(zip(seqs, activity, has, strict=True)):
        gc = (s.count("G") + s.count("C")) / len(s)
        lines.append(f"s{i}\tchr{CHROMS[i % len(CHROMS)]}\t{s}\t{a:.4f}\t{h}\t{gc:.4f}")
    out = Path(path)
    with atomic_path(out) as tmp:
        Path(tmp).write_text("\n".join(lines) + "\n")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hexamer.demo.motif_task", description=__doc__.split("\n")[0]
    )
    parser.add_argument("out", help="the TSV table to write")
    parser.add_argument("--n", type=int, default=2000, help="rows (default 2000)")
    parser.add_argument("--length", type=int, default=120, help="window length, bp (default 120)")
    parser.add_argument("--seed", type=int, default=5, help="seed of the draw (default 5)")
    args = parser.parse_args(argv)
    try:
        write_motif_table(args.out, n=args.n, length=args.length, seed=args.seed)
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
