"""``hexamer.design.design``: candidates that meet every hard constraint, decoded by the model.

``method="sample"``: FNS base-level sampling under the constraints (temperature, top-p), best-of-N
reranking by base-level log-likelihood (``oversample`` draws per wanted candidate), duplicates and
candidates closer than ``min_distance`` (Hamming) to a better one dropped. ``method="beam"``: beam
search over bases of width ``width``, plus the greedy sequence, so the best candidate never scores
below greedy decoding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hexamer.design.check import ConstraintResult, check, gc_fraction
from hexamer.design.constraints import ConstraintSet, compile_constraints
from hexamer.design.decode import Decoded, beam_search, sample_batch
from hexamer.design.spec import DesignConstraints, DesignError

__all__ = ["Candidate", "DesignOptions", "DesignResult", "design", "hamming"]

Method = Literal["sample", "beam"]


@dataclass(frozen=True)
class DesignOptions:
    """How to search; every number is range-checked on construction."""

    n: int = 1
    method: Method = "sample"
    temperature: float = 1.0
    top_p: float = 1.0
    oversample: int = 1
    width: int = 8
    min_distance: int = 1
    seed: int = 0
    batch_size: int = 16
    max_rounds: int = 20

    def __post_init__(self) -> None:
        for name in ("n", "oversample", "width", "min_distance", "batch_size", "max_rounds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DesignError(f"{name} must be an integer >= 1, got {v!r}")
        if self.method not in ("sample", "beam"):
            raise DesignError(f"method must be 'sample' or 'beam', got {self.method!r}")
        t = self.temperature
        if not (isinstance(t, int | float) and math.isfinite(t) and t > 0):
            raise DesignError(f"temperature must be a finite number > 0, got {t!r}")
        if not (isinstance(self.top_p, int | float) and 0 < self.top_p <= 1):
            raise DesignError(f"top_p must lie in (0, 1], got {self.top_p!r}")
        if self.method == "beam" and self.width < self.n:
            raise DesignError(f"beam width {self.width} is smaller than n {self.n}")


@dataclass
class Candidate:
    """One designed sequence, its base-level log-likelihood and every constraint measured on it."""

    sequence: str
    log_likelihood: float
    base_log_probs: list[float] = field(repr=False)
    checks: list[ConstraintResult] = field(repr=False)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def gc(self) -> float:
        return gc_fraction(self.sequence)

    def row(self, name: str, per_base: bool = False) -> dict[str, Any]:
        """A table row: id, sequence, scores, GC, and ``<constraint>`` / ``<constraint>_pass`` columns."""
        out: dict[str, Any] = {
            "id": name,
            "sequence": self.sequence,
            "log_likelihood": self.log_likelihood,
            "mean_log_likelihood": self.log_likelihood / len(self.sequence),
            "gc": round(self.gc, 6),
            "pass": self.passed,
        }
        for c in self.checks:
            out[c.name] = c.value if isinstance(c.value, int | float | str) else str(c.value)
            out[f"{c.name}_pass"] = c.passed
        if per_base:
            out["base_log_probs"] = list(self.base_log_probs)
        return out


@dataclass
class DesignResult:
    """The candidates, best first, and how many sequences were decoded to find them."""

    candidates: list[Candidate]
    decoded: int
    requested: int

    def summary(self) -> dict[str, Any]:
        lls = [c.log_likelihood for c in self.candidates]
        return {
            "requested": self.requested,
            "found": len(self.candidates),
            "decoded": self.decoded,
            "all_pass": all(c.passed for c in self.candidates),
            "best_log_likelihood": max(lls) if lls else None,
        }


def hamming(a: str, b: str) -> int:
    """Positions where two equal-length sequences differ."""
    return sum(x != y for x, y in zip(a, b, strict=True))


def _select(pool: list[Decoded], n: int, min_distance: int) -> list[Decoded]:
    """Best-first, skipping duplicates and sequences within ``min_distance`` of one already kept."""
    kept: list[Decoded] = []
    for d in sorted(pool, key=lambda d: (-d.log_likelihood, d.sequence)):
        if all(hamming(d.sequence, k.sequence) >= min_distance for k in kept):
            kept.append(d)
            if len(kept) == n:
                break
    return kept


def design(
    model: Any,
    constraints: DesignConstraints | ConstraintSet,
    options: DesignOptions | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> DesignResult:
    """Design ``options.n`` sequences meeting ``constraints`` with ``model`` (a local ``Carbon``).

    The constraints are compiled and proven satisfiable first (:class:`~hexamer.design.spec.
    UnsatisfiableError` names what cannot be met), before any model work. ``on_progress(done,
    total)`` is called after each decoded 6-mer step.
    """
    opts = options or DesignOptions()
    cs = constraints if isinstance(constraints, ConstraintSet) else compile_constraints(constraints)
    backend = getattr(model, "backend", model)
    tokens = -(-cs.length // backend.layout.k)
    if 1 + tokens > backend.context_length:
        raise DesignError(
            f"{cs.length} bases take {tokens} tokens after <dna>, more than the model's context of "
            f"{backend.context_length} tokens"
        )
    want = opts.n * opts.oversample
    batches = -(-want // opts.batch_size) if opts.method == "sample" else 2
    total = [tokens * batches]
    done = [0]

    def tick() -> None:
        done[0] += 1
        if on_progress is not None:
            on_progress(done[0], max(total[0], done[0]))

    if opts.method == "beam":
        pool = sample_batch(backend, cs, [None], on_token=tick)  # greedy: the beam's floor
        pool += beam_search(backend, cs, opts.width, on_token=tick)
        chosen = _select(pool, opts.n, opts.min_distance)
        decoded = len(pool)
    else:
        seeds = np.random.SeedSequence(opts.seed)
        pool, chosen, decoded = [], [], 0
        for _ in range(opts.max_rounds):
            while decoded < want:
                size = min(opts.batch_size, want - decoded)
                rngs: list[np.random.Generator | None] = [np.random.default_rng(s) for s in seeds.spawn(size)]
                pool += sample_batch(
                    backend, cs, rngs, temperature=opts.temperature, top_p=opts.top_p, on_token=tick
                )
                decoded += size
            chosen = _select(pool, opts.n, opts.min_distance)
            if len(chosen) == opts.n:
                break
            want += opts.n * opts.oversample  # too many duplicates or near neighbours: draw more
            total[0] += tokens * -(-opts.n * opts.oversample // opts.batch_size)
    spec = cs.spec
    out = [Candidate(d.sequence, d.log_likelihood, d.base_log_probs, check(spec, d.sequence)) for d in chosen]
    return DesignResult(out, decoded, opts.n)
