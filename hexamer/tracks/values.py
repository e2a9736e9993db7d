"""Track kinds and their per-base values, from ``(n, 4)`` log-probabilities and the reference.

With ``lp[b] = log P(base = b | context)`` (natural log, columns A, C, G, T; FNS marginals by
default) and ``r`` the reference base:

* ``logprob``: ``logprob_A`` … ``logprob_T`` = ``lp[b]`` and ``logprob_ref`` = ``lp[r]`` (nats, ≤ 0);
* ``prob``: ``prob_A`` … ``prob_T`` = ``exp(lp[b])`` (they sum to 1: the stacked logo of the hub);
* ``entropy``: ``-Σ_b P(b) log2 P(b)``, in **bits** (0 = certain, 2 = uniform);
* ``llr``: ``(1/3) Σ_{b≠r} (lp[b] − lp[r])``, the mean log-likelihood ratio of the three
  alternatives against the reference, in nats: **negative** where the model prefers the reference
  base (the sign of ``hexamer vep``'s window score, LL(alt) − LL(ref)).

A base the model does not score (inside an ``<oov>`` 6-mer, e.g. an ``N``) is NaN in every track,
and NaN is written as *absent*, never as zero.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["BASES", "KINDS", "parse_kinds", "track_names", "track_values"]

BASES = "ACGT"
#: kind -> the tracks it writes
KINDS: dict[str, tuple[str, ...]] = {
    "logprob": (*(f"logprob_{b}" for b in BASES), "logprob_ref"),
    "prob": tuple(f"prob_{b}" for b in BASES),
    "entropy": ("entropy",),
    "llr": ("llr",),
}
_INDEX = np.full(256, -1, dtype=np.int64)
for _i, _b in enumerate(BASES):
    _INDEX[ord(_b)] = _INDEX[ord(_b.lower())] = _i


def parse_kinds(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"logprob,entropy,llr"`` as a tuple of known kinds (order kept, duplicates dropped)."""
    items = [x.strip() for x in text.split(",")] if isinstance(text, str) else [str(x).strip() for x in text]
    items = [x for x in items if x]
    unknown = [x for x in items if x not in KINDS]
    if unknown or not items:
        raise ValueError(
            f"kinds must be a comma-separated subset of {', '.join(KINDS)}, got {','.join(items) or 'nothing'!r}"
        )
    return tuple(dict.fromkeys(items))


def track_names(kinds: Iterable[str]) -> list[str]:
    """The tracks (file stems) the kinds write, in a fixed order."""
    return [name for kind in kinds for name in KINDS[kind]]


def track_values(logprobs: np.ndarray, ref: str, kinds: Iterable[str]) -> dict[str, np.ndarray]:
    """Every track of ``kinds`` for one block: float32 arrays, NaN where a base is not scored
    (a NaN row of ``logprobs``, or a reference base that is not A/C/G/T)."""
    lp = np.asarray(logprobs, dtype=np.float64)
    ref_index = _INDEX[np.frombuffer(ref.encode("ascii", "replace"), dtype=np.uint8)]
    absent = np.isnan(lp).any(axis=1) | (ref_index < 0)
    lp = np.where(absent[:, None], np.nan, lp)
    rows = np.arange(len(lp))
    lp_ref = np.where(absent, np.nan, lp[rows, np.maximum(ref_index, 0)])
    out: dict[str, np.ndarray] = {}
    for kind in kinds:
        if kind == "logprob":
            for j, b in enumerate(BASES):
                out[f"logprob_{b}"] = lp[:, j]
            out["logprob_ref"] = lp_ref
        elif kind == "prob":
            for j, b in enumerate(BASES):
                out[f"prob_{b}"] = np.exp(lp[:, j])
        elif kind == "entropy":
            out["entropy"] = -(np.exp(lp) * lp).sum(axis=1) / np.log(2.0)
        elif kind == "llr":
            out["llr"] = (lp.sum(axis=1) - lp_ref) / 3.0 - lp_ref
        else:
            raise ValueError(f"unknown track kind {kind!r}")
    return {name: values.astype(np.float32) for name, values in out.items()}
