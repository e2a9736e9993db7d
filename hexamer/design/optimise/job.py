"""Oracle-guided design as one call: the rules of ``hexamer design`` (a :class:`DesignConstraints`),
an oracle, a start sequence and a method in; candidates measured like sampled designs (base-level
log-likelihood, GC, every constraint) plus their objective, oracle score and edits out, with the
run's trajectory. ``hexamer design --method evolve|anneal|minimal-edit`` and ``/v1/dna/design`` are
thin layers over :func:`optimise_design`; :meth:`OptimiseOptions.check` and :func:`check_start`
refuse bad input before any model work.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from hexamer.design.api import Candidate, DesignOptions, design
from hexamer.design.check import SpecEditConstraints, check
from hexamer.design.optimise.anneal import anneal
from hexamer.design.optimise.edits import Edit, EditRules, edits_between
from hexamer.design.optimise.evolve import check_count, evolve, minimal_edit, run_evolution
from hexamer.design.optimise.likelihood import LikelihoodScorer
from hexamer.design.optimise.objective import Objective
from hexamer.design.optimise.oracles import Oracle
from hexamer.design.optimise.trajectory import OptimiseResult, Step
from hexamer.design.spec import DesignConstraints, DesignError

__all__ = [
    "OPTIMISE_METHODS",
    "OptimiseOptions",
    "OptimisedCandidate",
    "OptimisedDesign",
    "check_start",
    "optimise_design",
    "parse_positions",
]

OptimiseMethod = Literal["evolve", "anneal", "minimal-edit"]
OPTIMISE_METHODS: tuple[str, ...] = ("evolve", "anneal", "minimal-edit")


def parse_positions(items: Iterable[str]) -> tuple[int, ...]:
    """0-based positions from ``"12"`` or inclusive ranges ``"0-19"`` (comma-separated allowed)."""
    out: set[int] = set()
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            lo, sep, hi = part.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise DesignError(f"frozen positions are 0-based numbers or ranges like 0-19, got {part!r}")
            a, b = int(lo), int(hi) if sep else int(lo)
            if b < a:
                raise DesignError(f"frozen range {part!r} ends before it starts")
            out.update(range(a, b + 1))
    return tuple(sorted(out))


@dataclass(frozen=True)
class OptimiseOptions:
    """How to optimise; numbers are range-checked on construction, positions by :meth:`check`."""

    method: OptimiseMethod = "evolve"
    weight: float = 0.0
    n: int = 1
    keep: int = 4
    rounds: int = 20
    steps: int = 1000
    t_start: float = 1.0
    t_end: float = 0.01
    seed: int = 0
    max_edits: int | None = None
    frozen: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in OPTIMISE_METHODS:
            raise DesignError(f"method must be one of {', '.join(OPTIMISE_METHODS)}, got {self.method!r}")
        if not (isinstance(self.weight, int | float) and math.isfinite(self.weight) and self.weight >= 0):
            raise DesignError(f"the likelihood weight must be finite and >= 0, got {self.weight!r}")
        try:
            check_count(self.n, "n", 1, 10_000)
            check_count(self.keep, "keep", 1, 10_000)
            check_count(self.rounds, "rounds", 1, 1_000_000)
            check_count(self.steps, "steps", 1, 10_000_000)
            check_count(self.seed, "seed", 0, 2**63 - 1)
            if self.max_edits is not None:
                check_count(self.max_edits, "max_edits", 0, 1 << 30)
        except ValueError as exc:
            raise DesignError(str(exc)) from None
        ok = all(isinstance(t, int | float) and math.isfinite(t) for t in (self.t_start, self.t_end))
        if not (ok and 0 < self.t_end <= self.t_start):
            raise DesignError(
                f"temperatures must satisfy 0 < t_end <= t_start, got {self.t_start}, {self.t_end}"
            )
        if self.method == "minimal-edit" and self.max_edits is None:
            raise DesignError("minimal-edit needs max_edits (the edit budget)")
        if self.method == "evolve" and self.n > self.keep:
            raise DesignError(
                f"n ({self.n}) must be <= keep ({self.keep}): evolution returns its kept sequences"
            )
        if self.method != "evolve" and self.n != 1:
            raise DesignError(f"{self.method} returns one sequence; n must be 1, got {self.n}")

    def check(self, length: int) -> None:
        """Refuse frozen positions or an edit budget that do not fit ``length`` bases."""
        outside = [p for p in self.frozen if not 0 <= p < length]
        if outside:
            raise DesignError(f"frozen positions {outside[:5]} lie outside the {length}-bp sequence")
        if self.max_edits is not None and self.max_edits > length:
            raise DesignError(f"max_edits {self.max_edits} is more than the {length} bases")


def check_start(spec: DesignConstraints, start: str) -> str:
    """The start sequence upper-cased, when it is ACGT text of the spec's length meeting every rule;
    else a DesignError naming what is wrong."""
    seq = start.strip().upper()
    bad = sorted(set(seq) - set("ACGT"))
    if not seq or bad:
        raise DesignError(f"the start sequence must be A/C/G/T text (found {bad or 'nothing'})")
    if len(seq) != spec.length:
        raise DesignError(f"the start sequence has {len(seq)} bases; the design length is {spec.length}")
    failed = [r.name for r in check(spec, seq) if not r.passed]
    if failed:
        raise DesignError(f"the start sequence breaks the constraints: {', '.join(failed)}")
    return seq


@dataclass
class OptimisedCandidate(Candidate):
    """A sampled design's measures plus what the optimiser maximised and the edits from the start."""

    objective: float = math.nan
    oracle: float = math.nan
    edits: tuple[Edit, ...] = ()

    def row(self, name: str, per_base: bool = False) -> dict[str, Any]:
        out = super().row(name, per_base)
        extra = {"objective": self.objective, "oracle": self.oracle, "n_edits": len(self.edits)}
        return {**out, **extra, "edits": ";".join(str(e) for e in self.edits)}

    def fasta_note(self) -> str:
        return f"{super().fasta_note()} objective={self.objective:.6g} edits={len(self.edits)}"


@dataclass
class OptimisedDesign:
    """The candidates (best first), the start sequence and the run itself (trajectory included)."""

    candidates: list[OptimisedCandidate]
    start: str
    run: OptimiseResult
    method: str
    trajectory: list[Step] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        best = self.candidates[0]
        first = self.run.trajectory[0]
        return {
            "method": self.method,
            "requested": len(self.candidates),
            "found": len(self.candidates),
            "all_pass": all(c.passed for c in self.candidates),
            "start_objective": first.objective,
            "best_objective": best.objective,
            "best_oracle": best.oracle,
            "best_log_likelihood": best.log_likelihood,
            "n_edits": len(best.edits),
            "steps": len(self.run.trajectory) - 1,
        }


def _measure(carbon: Any, spec: DesignConstraints, seqs: list[str]) -> list[tuple[float, list[float]]]:
    """Each sequence's base-level log-likelihood and per-base values (the numbers sampled designs report)."""
    out = []
    for seq in seqs:
        table = np.asarray(carbon.base_logprobs(seq))
        per_base = [float(table[i, "ACGT".index(b)]) for i, b in enumerate(seq)]
        out.append((float(sum(per_base)), per_base))
    return out


def optimise_design(
    carbon: Any,
    spec: DesignConstraints,
    oracle: Oracle,
    options: OptimiseOptions,
    *,
    start: str | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> OptimisedDesign:
    """Optimise ``oracle + weight · LL per base`` under ``spec`` from ``start`` (default: one
    sequence sampled by the model under the rules, with ``options.seed``). Every step keeps every
    rule of ``spec``; the candidates are measured like :func:`hexamer.design.design`'s."""
    options.check(spec.length)
    if start is None:
        start = design(carbon, spec, DesignOptions(n=1, seed=options.seed)).candidates[0].sequence
    seq = check_start(spec, start)
    scorer = LikelihoodScorer(carbon.backend) if options.weight > 0 else None
    objective = Objective(oracle, likelihood=scorer, weight=options.weight)
    rules = SpecEditConstraints(spec)
    common: dict[str, Any] = {"constraints": rules, "frozen": options.frozen, "on_step": on_step}
    if options.method == "evolve" and options.max_edits is not None:  # evolution within a budget
        budget = EditRules.make(seq, rules, options.frozen, options.max_edits)
        run = run_evolution(budget, objective, keep=options.keep, rounds=options.rounds, on_step=on_step)
    elif options.method == "evolve":
        run = evolve(seq, objective, keep=options.keep, rounds=options.rounds, **common)
    elif options.method == "anneal":
        run = anneal(
            seq, objective, steps=options.steps, t_start=options.t_start, t_end=options.t_end,
            seed=options.seed, max_edits=options.max_edits, **common,
        )  # fmt: skip
    else:
        assert options.max_edits is not None
        run = minimal_edit(seq, objective, max_edits=options.max_edits, **common)
    chosen = run.population[: options.n] if options.method == "evolve" else [run.sequence]
    scores = objective.score(chosen)
    measured = _measure(carbon, spec, chosen)
    candidates = []
    for i, (s, (ll, per_base)) in enumerate(zip(chosen, measured, strict=True)):
        total, oracle_score, _ = scores.row(i)
        edits = edits_between(seq, s)
        candidates.append(
            OptimisedCandidate(
                s, ll, per_base, check(spec, s), objective=total, oracle=oracle_score, edits=edits
            )
        )
    return OptimisedDesign(candidates, seq, run, options.method, run.trajectory)
