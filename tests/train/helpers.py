"""Helpers for the training tests: small DNA files and a fast tiny-run config."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hexamer.train import TrainConfig


def write_fasta(path: Path, records: dict[str, str]) -> Path:
    path.write_text("".join(f">{name}\n{seq}\n" for name, seq in records.items()), encoding="ascii")
    return path


def periodic_dna(n: int, seed: int = 0) -> str:
    """Learnable DNA: a 6-bp motif repeated with 10% random substitutions (the next 6-mer is
    mostly the previous one, which even a one-layer model learns in a few dozen steps)."""
    rng = np.random.default_rng(seed)
    motif = np.array(list("ATGCGT"))
    seq = np.resize(motif, n)
    flip = rng.random(n) < 0.1
    seq[flip] = rng.choice(list("ACGT"), size=int(flip.sum()))
    return "".join(seq)


def tiny_config(data: Path, out: Path, **changes: object) -> TrainConfig:
    """A run that takes about a second on one CPU thread (1-layer, hidden-32 model, 120-bp windows)."""
    base = {
        "data": [str(data)],
        "output_dir": str(out),
        "window_bp": 120,
        "batch_size": 4,
        "steps": 12,
        "warmup_steps": 2,
        "lr": 5e-3,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_layers": 1,
        "num_heads": 2,
        "num_kv_heads": 1,
        "context_length": 64,
        "eval_every": 0,
        "save_every": 0,
        "log_every": 1,
        "val_max_bp": 600,
        "threads": 1,
        "device": "cpu",
    }
    base.update(changes)
    return TrainConfig.from_dict(base)


def init_config(data: Path, out: Path, init: str, **changes: object) -> TrainConfig:
    """:func:`tiny_config` with ``--init INIT`` and none of its shape overrides, so the model
    folder (or the named shape) decides the model."""
    return tiny_config(data, out, **changes).replace(
        init=init,
        hidden_size=None,
        intermediate_size=None,
        num_layers=None,
        num_heads=None,
        num_kv_heads=None,
        context_length=None,
    )
