"""Write the copy-rich training sequence of the demo model (``scripts/train_demo_model.sh``).

Real genomes repeat too rarely for a small model to learn to copy from its context in a few
hundred steps, so part of the training data is real DNA in which stretches are written again:
``PIECES`` pieces of 6,000 bp cut from the TRAINING split of ``hexamer/data/dna`` (never the
held-out ends), each carrying 1-4 *repeat events*. An event takes a segment (half of them random
uniform DNA, half real DNA from elsewhere in the training split) of 24-1,200 bp (log-uniform, so
short key/value-like pairs and long stretches both occur) and writes it 2-4 times into the piece:
tandem (back to back) for 15% of events, otherwise at random places; 85% of events keep every copy
in the same 6-mer frame as the first (distance a multiple of 6: the copy tokenizes as the same
6-mers, the form an induction head can learn from), and 30% carry 0.5-2% substitutions. 15% of
pieces have random uniform DNA as background instead of real DNA. The pieces are concatenated into
one record, so any training window holds copies. Deterministic (seed 0).

    python scripts/demo_copy_data.py OUT.fa [PIECES] [PIECE_BP] [SEED]
    python scripts/demo_copy_data.py --pairs OUT.fa TOTAL_BP MAX_BP [SEED] [MIN_BP] [MAX_GAP_BP]

``--pairs`` writes the plainest copy task instead, concatenated until TOTAL_BP: a segment X of
MIN_BP..MAX_BP bp (default MIN_BP 60; multiples of 6; half random uniform DNA, half real
training-split DNA), a gap of 0..MAX_GAP_BP bp (default MAX_BP; a multiple of 6; random or real),
then X again, in the same 6-mer frame.
"""

from __future__ import annotations

import glob
import sys

import numpy as np

from hexamer.train.data import load_corpus

PIECE_BP = 6000  # set by main()


def _random_dna(rng: np.random.Generator, n: int) -> str:
    return "".join(np.array(list("ACGT"))[rng.integers(0, 4, n)])


def _real(rng: np.random.Generator, train: list[str], weights: np.ndarray, n: int) -> str:
    seq = train[int(rng.choice(len(train), p=weights))]
    start = int(rng.integers(0, len(seq) - n))
    return seq[start : start + n]


def _mutate(rng: np.random.Generator, seg: str, rate: float) -> str:
    chars = list(seg)
    for i in np.flatnonzero(rng.random(len(chars)) < rate):
        chars[i] = "ACGT"[("ACGT".index(chars[i]) + int(rng.integers(1, 4))) % 4]
    return "".join(chars)


def _event(rng: np.random.Generator, piece: list[str], seg: str) -> None:
    """Write ``seg`` 2-4 times into ``piece`` (in place)."""
    n = len(seg)
    copies = int(rng.choice([2, 2, 2, 3, 4]))
    in_frame = rng.random() < 0.85
    rate = float(rng.uniform(0.005, 0.02)) if rng.random() < 0.3 else 0.0
    room = PIECE_BP - n
    if rng.random() < 0.15 and copies * n <= PIECE_BP:  # tandem
        first = int(rng.integers(0, PIECE_BP - copies * n + 1))
        starts = [first + i * n for i in range(copies)]
    else:
        first = int(rng.integers(0, room + 1))
        starts = [first]
        for _ in range(copies - 1):
            pos = int(rng.integers(0, room + 1))
            if in_frame:
                pos = first + ((pos - first) // 6) * 6
                pos = pos if pos >= 0 else pos + 6
            starts.append(min(max(pos, 0), room))
    for i, pos in enumerate(starts):
        piece[pos : pos + n] = list(seg if i == 0 or not rate else _mutate(rng, seg, rate))


def build(n_pieces: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    files = sorted(glob.glob("hexamer/data/dna/*.fa.gz"))
    train = [s.bases for s in load_corpus(files, val_fraction=0.1).train]
    weights = np.array([len(s) for s in train], dtype=float)
    weights /= weights.sum()
    pieces = []
    for _ in range(n_pieces):
        background = (
            _random_dna(rng, PIECE_BP) if rng.random() < 0.15 else _real(rng, train, weights, PIECE_BP)
        )
        piece = list(background)
        for _ in range(int(rng.integers(1, 5))):
            n = int(np.exp(rng.uniform(np.log(24), np.log(min(1200, PIECE_BP // 3)))))
            seg = _random_dna(rng, n) if rng.random() < 0.5 else _real(rng, train, weights, n)
            _event(rng, piece, seg)
        pieces.append("".join(piece))
    return "".join(pieces)


def build_pairs(
    total_bp: int, max_bp: int, seed: int = 0, min_bp: int = 60, max_gap_bp: int | None = None
) -> str:
    """X + gap + X pieces, concatenated until ``total_bp`` (see the module docstring)."""
    max_gap_bp = max_bp if max_gap_bp is None else max_gap_bp
    rng = np.random.default_rng(seed)
    files = sorted(glob.glob("hexamer/data/dna/*.fa.gz"))
    train = [s.bases for s in load_corpus(files, val_fraction=0.1).train]
    weights = np.array([len(s) for s in train], dtype=float)
    weights /= weights.sum()
    parts: list[str] = []
    n = 0
    while n < total_bp:
        seg_bp = int(rng.integers(min_bp // 6, max_bp // 6 + 1)) * 6
        gap_bp = int(rng.integers(0, max_gap_bp // 6 + 1)) * 6
        seg = _random_dna(rng, seg_bp) if rng.random() < 0.5 else _real(rng, train, weights, seg_bp)
        gap = _random_dna(rng, gap_bp) if rng.random() < 0.5 else _real(rng, train, weights, gap_bp)
        parts.append(seg + gap + seg)
        n += 2 * seg_bp + gap_bp
    return "".join(parts)


def main(argv: list[str]) -> None:
    global PIECE_BP
    if len(argv) > 1 and argv[1] == "--pairs":
        out, total_bp, max_bp = argv[2], int(argv[3]), int(argv[4])
        seed = int(argv[5]) if len(argv) > 5 else 0
        min_bp = int(argv[6]) if len(argv) > 6 else 60
        max_gap = int(argv[7]) if len(argv) > 7 else max_bp
        seq = build_pairs(total_bp, max_bp, seed, min_bp, max_gap)
        with open(out, "w") as fh:
            fh.write(
                f">pairs {total_bp} bp of X + gap + X, X of {min_bp}-{max_bp} bp, gap up to {max_gap} bp\n"
            )
            fh.writelines(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))
        return
    out = argv[1]
    n_pieces = int(argv[2]) if len(argv) > 2 else 800
    PIECE_BP = int(argv[3]) if len(argv) > 3 else 6000
    seq = build(n_pieces, int(argv[4]) if len(argv) > 4 else 0)
    with open(out, "w") as fh:
        fh.write(f">copies {n_pieces} pieces of {PIECE_BP} bp with stretches written 2-4 times\n")
        fh.writelines(seq[i : i + 60] + "\n" for i in range(0, len(seq), 60))


if __name__ == "__main__":
    main(sys.argv)
