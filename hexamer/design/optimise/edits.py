"""Single-base edits under hard constraints: which edits an optimiser may try, and edits as records.

The hard constraints come from a constraint set that satisfies :class:`EditConstraints` (the
design constraints of :mod:`hexamer.design` do); an optimiser asks it before every edit and keeps
only sequences it calls satisfied, so every step of a run satisfies every constraint. Frozen
positions and the edit budget of minimal-edit mode are handled here, not by the constraint set.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "BASES",
    "Edit",
    "EditConstraints",
    "EditRules",
    "NoConstraints",
    "apply_edit",
    "edits_between",
    "hamming",
]

BASES = "ACGT"


@runtime_checkable
class EditConstraints(Protocol):
    """Hard constraints an optimiser keeps true: ``allows_edit`` is asked before a single-base
    substitution (it may answer from the partial knowledge of one edit, and may be conservative);
    ``satisfied`` is the final word on a whole sequence."""

    def allows_edit(self, seq: str, pos: int, base: str) -> bool: ...

    def satisfied(self, seq: str) -> bool: ...


class NoConstraints:
    """No hard constraint: every edit allowed, every sequence satisfied."""

    def allows_edit(self, seq: str, pos: int, base: str) -> bool:
        return True

    def satisfied(self, seq: str) -> bool:
        return True


@dataclass(frozen=True)
class Edit:
    """One substitution: 0-based ``pos``, the base of the start sequence there (``ref``) and the
    base now (``alt``)."""

    pos: int
    ref: str
    alt: str

    def __str__(self) -> str:
        return f"{self.ref}{self.pos + 1}{self.alt}"


def apply_edit(seq: str, pos: int, base: str) -> str:
    return seq[:pos] + base + seq[pos + 1 :]


def hamming(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def edits_between(start: str, seq: str) -> tuple[Edit, ...]:
    """The substitutions that turn ``start`` into ``seq`` (same length), by position."""
    return tuple(Edit(i, a, b) for i, (a, b) in enumerate(zip(start, seq, strict=True)) if a != b)


@dataclass(frozen=True)
class EditRules:
    """What an optimiser may change: the hard ``constraints``, ``frozen`` positions (0-based,
    never edited) and, with ``max_edits``, at most that many positions differing from ``start``."""

    constraints: EditConstraints
    start: str
    frozen: frozenset[int] = frozenset()
    max_edits: int | None = None

    @classmethod
    def make(
        cls,
        start: str,
        constraints: EditConstraints | None = None,
        frozen: Iterable[int] = (),
        max_edits: int | None = None,
    ) -> EditRules:
        """Checked rules: ``start`` is ACGT text that satisfies the constraints, frozen positions
        lie inside it, ``max_edits`` >= 0."""
        if not start or set(start) - set(BASES):
            bad = sorted(set(start) - set(BASES))
            raise ValueError(f"start sequence must be non-empty A/C/G/T text (found {bad or 'nothing'})")
        frozen_set = frozenset(int(p) for p in frozen)
        outside = sorted(p for p in frozen_set if not 0 <= p < len(start))
        if outside:
            raise ValueError(f"frozen positions {outside[:5]} lie outside the {len(start)}-bp start sequence")
        if max_edits is not None and max_edits < 0:
            raise ValueError(f"max_edits must be >= 0, got {max_edits}")
        rules = cls(constraints or NoConstraints(), start, frozen_set, max_edits)
        if not rules.constraints.satisfied(start):
            raise ValueError("the start sequence does not satisfy the hard constraints")
        return rules

    def allowed(self, seq: str, pos: int, base: str) -> bool:
        """Whether the edit ``seq[pos] -> base`` keeps every rule (the budget counted from ``start``)."""
        if pos in self.frozen or seq[pos] == base:
            return False
        if self.max_edits is not None:
            n = hamming(seq, self.start) + (base != self.start[pos]) - (seq[pos] != self.start[pos])
            if n > self.max_edits:
                return False
        return self.constraints.allows_edit(seq, pos, base)

    def single_edits(self, seq: str, positions: Collection[int] | None = None) -> list[tuple[int, str]]:
        """Every allowed single edit of ``seq`` (``positions``: only these) whose result the
        constraint set calls satisfied."""
        where = range(len(seq)) if positions is None else sorted(positions)
        out = []
        for pos in where:
            for base in BASES:
                if self.allowed(seq, pos, base) and self.constraints.satisfied(apply_edit(seq, pos, base)):
                    out.append((pos, base))
        return out
