"""A simulated motif task on real human DNA (the shipped chr20 slice), for the fine-tuning tests.

Windows of the GRCh37 chr20 slice get 0-3 copies of the AP-1 site ``TGACTCA`` written over random
positions; the regression label is the number of copies plus Gaussian noise (s.d. 0.3), the class
label is whether any copy was planted. The labels are simulated, the DNA around the sites is real.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pysam

HUMAN = Path(__file__).resolve().parents[2] / "hexamer" / "data" / "dna" / "human_chr20_2.fa.gz"
MOTIF = "TGACTCA"


def motif_task(n: int, length: int = 120, seed: int = 0) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(sequences, activity, has_motif)`` for ``n`` windows of ``length`` bp."""
    with pysam.FastxFile(str(HUMAN)) as fx:
        genome = next(iter(fx)).sequence
    rng = np.random.default_rng(seed)
    starts = rng.choice(len(genome) // length - 1, size=n, replace=False) * length
    seqs, counts = [], np.zeros(n, dtype=np.int64)
    for i, s in enumerate(starts):
        seq = list(genome[s : s + length])
        counts[i] = rng.integers(0, 4)
        for pos in rng.choice(length - len(MOTIF), size=counts[i], replace=False):
            seq[pos : pos + len(MOTIF)] = MOTIF
        seqs.append("".join(seq[:length]))
    activity = counts + rng.normal(0, 0.3, n)
    return seqs, activity, (counts > 0).astype(np.int64)
