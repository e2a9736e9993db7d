"""Held-out accuracy of a model beside Markov baselines, with FNS marginals and exact conditionals.

A 6-mer model predicts base ``j`` of a token in two ways (``Carbon.base_logprobs``):

* ``fns``: the FNS marginal ``P_j(b)``, blind to bases 0..j-1 of the same token (base 5 is
  predicted six bases ahead) - what ``hexamer train`` validates and bp-level generation uses;
* ``exact``: ``P(b_j | b_0..b_{j-1}, context)`` from the same 6-mer distribution - every earlier
  base is seen, the information a next-base Markov chain has.

The fair comparison with a next-base Markov chain is therefore ``exact``; the FNS accuracy is the
one to put beside the *aligned* Markov chain of :mod:`hexamer.train.evaluate`. Everything is
scored on the same held-out bases: the last ``val_fraction`` of every sequence (the split
``hexamer train`` holds out), cut into ``window_bp`` windows, each scored from its own start.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from hexamer.carbon import Carbon
from hexamer.demo.markov import NextBaseMarkov, acgt_codes
from hexamer.train.data import load_corpus, validation_windows

__all__ = ["HeldoutReport", "heldout_report", "heldout_windows", "model_accuracy"]


@dataclass
class HeldoutReport:
    """Per-base accuracy and mean log P(true base) (nats/base) on held-out windows.

    ``markov`` maps an order to the next-base Markov accuracy (fitted on the training split, both
    strands); ``by_genome`` holds the same figures per held-out sequence.
    """

    n_bases: int
    fns_accuracy: float
    exact_accuracy: float
    fns_logp: float
    exact_logp: float
    markov: dict[int, float]
    markov_logp: dict[int, float]
    composition: float
    by_genome: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def heldout_windows(
    files: Sequence[str | os.PathLike[str]],
    *,
    val_fraction: float = 0.1,
    window_bp: int = 6000,
    max_bp: int = 0,
) -> tuple[list[str], list[tuple[str, str]]]:
    """(training sequences, held-out (sequence name, window) pairs) for ``files``, split exactly
    as ``hexamer train --val-fraction`` splits them (``max_bp``: round-robin cap, 0 = all)."""
    corpus = load_corpus([os.fspath(p) for p in files], val_fraction=val_fraction)
    names = {id(s): s.name.removesuffix(":held-out") for s in corpus.val}
    windows: list[tuple[str, str]] = []
    for seg in corpus.val:  # validation_windows keeps no names: cut each segment on its own
        for _, bases in validation_windows([seg], window_bp):
            windows.append((names[id(seg)], bases))
    if max_bp:
        order = [(name, b) for _, (name, b) in sorted(_round_robin(corpus.val, window_bp, names))]
        windows, total = [], 0
        for name, bases in order:
            if total >= max_bp:
                break
            windows.append((name, bases))
            total += len(bases)
    return [s.bases for s in corpus.train], windows


def _round_robin(
    segments: Sequence[Any], window_bp: int, names: dict[int, str]
) -> list[tuple[tuple[int, int], tuple[str, str]]]:
    """Windows keyed by (depth, segment index): the order ``validation_windows(max_bp=...)`` uses."""
    out = []
    for s_i, seg in enumerate(segments):
        for depth, start in enumerate(range(0, len(seg.bases), window_bp)):
            out.append(((depth, s_i), (names[id(seg)], seg.bases[start : start + window_bp])))
    return out


def model_accuracy(carbon: Carbon, windows: Sequence[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Per sequence name and ``"all"``: n, fns/exact accuracy and mean log P(true base)."""
    sums: dict[str, np.ndarray] = {}
    for name, bases in windows:
        codes = acgt_codes(bases)
        ok = np.flatnonzero(codes >= 0)
        row = np.zeros(5)
        row[0] = len(ok)
        for col, method in ((1, "fns"), (3, "exact")):
            lp = carbon.base_logprobs(bases, method=method)[ok]  # type: ignore[arg-type]
            row[col] = float((lp.argmax(1) == codes[ok]).sum())
            row[col + 1] = float(lp[np.arange(len(ok)), codes[ok]].sum())
        for key in (name, "all"):
            sums[key] = sums.get(key, np.zeros(5)) + row
    return {
        key: {
            "n": int(s[0]),
            "fns_accuracy": s[1] / s[0],
            "fns_logp": s[2] / s[0],
            "exact_accuracy": s[3] / s[0],
            "exact_logp": s[4] / s[0],
        }
        for key, s in sums.items()
    }


def heldout_report(
    carbon: Carbon,
    files: Sequence[str | os.PathLike[str]],
    *,
    val_fraction: float = 0.1,
    window_bp: int = 6000,
    max_bp: int = 0,
    orders: Sequence[int] = (1, 2, 3, 4, 5, 6, 8),
) -> HeldoutReport:
    """The model and the Markov baselines on the held-out split of ``files`` (see the module doc)."""
    train, windows = heldout_windows(files, val_fraction=val_fraction, window_bp=window_bp, max_bp=max_bp)
    model = model_accuracy(carbon, windows)
    markov: dict[int, float] = {}
    markov_logp: dict[int, float] = {}
    genome_markov6: dict[str, list[float]] = {}
    for order in orders:
        chain = NextBaseMarkov(order).fit(train)
        right = total = 0
        logp = 0.0
        for name, bases in windows:
            r, n = chain.accuracy(bases)
            s = chain.score(bases) * n
            right, total, logp = right + r, total + n, logp + s
            if order == 6:
                acc = genome_markov6.setdefault(name, [0.0, 0.0])
                acc[0] += r
                acc[1] += n
        markov[order] = right / max(total, 1)
        markov_logp[order] = logp / max(total, 1)
    counts = np.zeros(4, dtype=np.int64)
    for seq in train:
        c = acgt_codes(seq)
        counts += np.bincount(c[c >= 0], minlength=4)
    best = int(counts.argmax())
    comp_right = sum(int((acgt_codes(b) == best).sum()) for _, b in windows)
    overall = model.pop("all")
    by_genome = {
        name: {**m, "markov6_accuracy": genome_markov6[name][0] / genome_markov6[name][1]}
        for name, m in sorted(model.items())
    }
    return HeldoutReport(
        n_bases=overall["n"],
        fns_accuracy=overall["fns_accuracy"],
        exact_accuracy=overall["exact_accuracy"],
        fns_logp=overall["fns_logp"],
        exact_logp=overall["exact_logp"],
        markov=markov,
        markov_logp=markov_logp,
        composition=comp_right / max(overall["n"], 1),
        by_genome=by_genome,
    )
