"""What the demo model does with its context, measured the same way by ``hexamer demo`` and by
``scripts/eval_demo_model.py`` (the model card's figures): copying a random sequence written twice,
retrieving a planted value (Genome-NIAH's task at the model's own context length), telling real
human DNA it never saw from the same DNA dinucleotide-shuffled, and generating without collapsing
into short repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.carbon import Carbon
from hexamer.demo.markov import acgt_codes
from hexamer.demo.shuffle import dinucleotide_shuffle

__all__ = [
    "FAR_HUMAN_REGION",
    "copy_score",
    "distinct_kmers",
    "far_human_file",
    "far_human_windows",
    "planted_value_retrieval",
    "real_vs_shuffled",
]

#: The held-out human region (GRCh37): another chromosome than any training slice.
FAR_HUMAN_REGION = "chrX:20,000,001-20,048,000 (GRCh37)"


def far_human_file() -> Path:
    """The shipped far held-out human DNA (``hexamer/data/dna-heldout``; never trained on)."""
    path = Path(str(resources.files("hexamer").joinpath("data/dna-heldout/human_chrX_far.fa.gz")))
    if not path.is_file():
        raise FileNotFoundError(f"the held-out human DNA is missing from this installation (expected {path})")
    return path


def far_human_windows(window_bp: int = 6000, max_windows: int = 0) -> list[str]:
    """The far held-out human region cut into ``window_bp`` windows (``max_windows``: 0 = all)."""
    from hexamer.train.data import load_corpus

    bases = load_corpus([str(far_human_file())], val_fraction=0.0).train[0].bases
    windows = [bases[i : i + window_bp] for i in range(0, len(bases), window_bp)]
    return windows[:max_windows] if max_windows else windows


def _true_logp(carbon: Carbon, seq: str, method: str) -> np.ndarray:
    lp = carbon.base_logprobs(seq, method=method)  # type: ignore[arg-type]
    codes = acgt_codes(seq)
    return lp[np.arange(len(seq)), codes]


def copy_score(carbon: Carbon, unit_bp: int = 600, seed: int = 7) -> dict[str, float]:
    """A random ``unit_bp`` sequence written twice: mean log P(base) (exact conditionals) and
    per-base accuracy of each copy. 0 is perfect copying, log(1/4) = -1.386 is knowing nothing."""
    rng = np.random.default_rng(seed)
    unit = "".join(rng.choice(list("ACGT"), unit_bp))
    seq = unit + unit
    lp = carbon.base_logprobs(seq, method="exact")
    codes = acgt_codes(seq)
    true = lp[np.arange(len(seq)), codes]
    right = lp.argmax(1) == codes
    return {
        "copy1_logp": float(true[:unit_bp].mean()),
        "copy2_logp": float(true[unit_bp:].mean()),
        "copy1_accuracy": float(right[:unit_bp].mean()),
        "copy2_accuracy": float(right[unit_bp:].mean()),
    }


def real_vs_shuffled(
    carbon: Carbon, windows: Sequence[str], seed: int = 0, methods: Sequence[str] = ("exact", "fns")
) -> dict[str, float]:
    """Mean log P(base) (exact conditionals and/or FNS marginals) of real windows and of the same
    windows dinucleotide-shuffled (seed ``seed + i`` for window i); ``gap`` = real - shuffled."""
    out: dict[str, float] = {}
    for method in methods:
        real = np.concatenate([_true_logp(carbon, w, method) for w in windows])
        shuf = np.concatenate(
            [_true_logp(carbon, dinucleotide_shuffle(w, seed + i), method) for i, w in enumerate(windows)]
        )
        out[f"real_{method}"] = float(real.mean())
        out[f"shuffled_{method}"] = float(shuf.mean())
        out[f"gap_{method}"] = float(real.mean() - shuf.mean())
    out["n_bases"] = float(sum(len(w) for w in windows))
    return out


def planted_value_retrieval(
    carbon: Carbon,
    haystack_file: str | Path,
    *,
    n: int = 20,
    ctx_tokens: int | None = None,
    seed: int = 42,
    task: str = "niah",
) -> dict[str, Any]:
    """Genome-NIAH's plain task at the model's native context (``ctx_tokens``: default the model's
    ``max_position_embeddings``): a random 24-bp KEY+VALUE planted in held-out real DNA at depths
    0.1-0.9, KEY again at the end; greedy token decoding must write VALUE exactly. ``task``
    ``neardup_d4``/``d2``/``d1`` adds 8 decoy pairs whose keys differ from KEY at 4/2/1 bases."""
    from hexamer.evals.niah_build import NiahBuildConfig, build_cell, load_genome

    ctx = ctx_tokens or int(carbon.model.config.max_position_embeddings)
    cfg = NiahBuildConfig(ctx=(ctx,), tasks=(task,), n=n, seed=seed, fasta=(str(haystack_file),))
    rows = list(build_cell(cfg, [load_genome(haystack_file)], task, ctx))
    gens = carbon.generate([r["prompt"] for r in rows], max_bp=24, mode="token", temperature=0)
    exact = [g.sequence[:24] == r["value"] for g, r in zip(gens, rows, strict=True)]  # type: ignore[union-attr]
    bases = [
        sum(a == b for a, b in zip(g.sequence[:24], r["value"], strict=False)) / 24  # type: ignore[union-attr]
        for g, r in zip(gens, rows, strict=True)
    ]
    return {
        "ctx_tokens": ctx,
        "prompt_bp": len(rows[0]["prompt"]),
        "n": len(rows),
        "exact_match": float(np.mean(exact)),
        "base_accuracy": float(np.mean(bases)),
    }


def distinct_kmers(seq: str, k: int = 6) -> int:
    """How many different k-mers ``seq`` holds (a 300-bp stretch has at most 295 six-mers)."""
    return len({seq[i : i + k] for i in range(len(seq) - k + 1)})
