"""What a designed sequence must satisfy, as the user states it: :class:`DesignConstraints`, checked
on construction so that bad input fails before any model work."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hexamer.design.codons import AMINO_ACIDS, STOP
from hexamer.design.iupac import parse_iupac
from hexamer.design.sites import site_of

__all__ = ["DesignConstraints", "DesignError", "UnsatisfiableError"]

#: the longest sequence a constraint set may describe (its GC table is length**2 integers)
MAX_LENGTH = 4096


class DesignError(ValueError):
    """A design request that cannot run: bad input, or constraints that cannot all be met."""


class UnsatisfiableError(DesignError):
    """The constraints cannot all be met; ``constraint`` names the one (or the combination) at fault."""

    def __init__(self, constraint: str, message: str) -> None:
        super().__init__(f"constraints cannot be met ({constraint}): {message}")
        self.constraint = constraint


@dataclass(frozen=True)
class DesignConstraints:
    """Hard constraints on a designed sequence of exactly ``length`` bases.

    ``mask``: IUPAC code per position from the first base (may be shorter than ``length``);
    ``prefix`` / ``suffix``: fixed bases at the start / end; ``motifs``: ``(position, IUPAC)`` pairs,
    0-based; ``avoid``: IUPAC patterns forbidden on both strands; ``avoid_sites``: enzyme names of
    the shipped table (:func:`hexamer.design.sites.known_enzymes`), forbidden on both strands;
    ``max_homopolymer``: longest run of one base; ``gc``: ``(min, max)`` G+C fraction of the whole
    sequence, and of every ``gc_window``-base window when ``gc_window`` is set; ``translate_to``: a
    protein the bases from ``cds_start`` (default: just after the prefix) encode, codons chosen by
    the model, no internal stop (a final ``*`` asks for a stop codon).
    """

    length: int
    mask: str | None = None
    prefix: str = ""
    suffix: str = ""
    motifs: tuple[tuple[int, str], ...] = ()
    avoid: tuple[str, ...] = ()
    avoid_sites: tuple[str, ...] = ()
    max_homopolymer: int | None = None
    gc: tuple[float, float] | None = None
    gc_window: int | None = None
    translate_to: str | None = None
    cds_start: int | None = None
    patterns: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            self._validate()
        except DesignError:
            raise
        except ValueError as exc:  # an IUPAC letter or an enzyme name
            raise DesignError(str(exc)) from None

    def _validate(self) -> None:
        n = self.length
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LENGTH:
            raise DesignError(f"length must be an integer in [1, {MAX_LENGTH}], got {n!r}")
        object.__setattr__(self, "motifs", tuple((int(p), str(s)) for p, s in self.motifs))
        object.__setattr__(self, "avoid", tuple(self.avoid))
        object.__setattr__(self, "avoid_sites", tuple(self.avoid_sites))
        if self.mask is not None:
            parse_iupac(self.mask, "mask")
            if len(self.mask) > n:
                raise DesignError(f"mask covers {len(self.mask)} bases but the length is {n}")
        for name, seq in (("prefix", self.prefix), ("suffix", self.suffix)):
            if seq:
                parse_iupac(seq, name)
                if len(seq) > n:
                    raise DesignError(f"{name} has {len(seq)} bases, longer than the length {n}")
        if len(self.prefix) + len(self.suffix) > n:
            raise DesignError(
                f"prefix ({len(self.prefix)} bp) and suffix ({len(self.suffix)} bp) overlap in {n} bases"
            )
        for pos, seq in self.motifs:
            parse_iupac(seq, f"motif at {pos}")
            if pos < 0 or pos + len(seq) > n:
                raise DesignError(f"motif {seq} at position {pos} does not fit in {n} bases")
        patterns = [(f"avoid {p}", p.upper()) for p in self.avoid]
        for p in self.avoid:
            parse_iupac(p, f"avoid pattern {p!r}")
        patterns += [(f"site {e}", site_of(e)) for e in self.avoid_sites]
        object.__setattr__(self, "patterns", tuple(patterns))
        self._check_numbers()
        self._check_protein()

    def _check_numbers(self) -> None:
        n = self.length
        h = self.max_homopolymer
        if h is not None and (isinstance(h, bool) or not isinstance(h, int) or h < 1):
            raise DesignError(f"max_homopolymer must be an integer >= 1, got {h!r}")
        if self.gc is not None:
            lo, hi = (float(x) for x in self.gc)
            if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi <= 1):
                raise DesignError(f"gc must be MIN:MAX with 0 <= MIN <= MAX <= 1, got {lo}:{hi}")
            object.__setattr__(self, "gc", (lo, hi))
        w = self.gc_window
        if w is not None:
            if self.gc is None:
                raise DesignError("gc_window needs a gc range")
            if isinstance(w, bool) or not isinstance(w, int) or w < 1:
                raise DesignError(f"gc_window must be an integer >= 1, got {w!r}")
            if w > n:
                raise DesignError(f"gc_window {w} is larger than the length {n}")

    def _check_protein(self) -> None:
        protein = self.translate_to
        if protein is None:
            if self.cds_start is not None:
                raise DesignError("cds_start needs translate_to")
            return
        protein = protein.strip().upper()
        if not protein:
            raise DesignError("translate_to is empty")
        body = protein[:-1] if protein.endswith(STOP) else protein
        bad = sorted({a for a in body if a not in AMINO_ACIDS})
        if bad:
            raise DesignError(
                f"translate_to: {''.join(bad)!r} not amino acids (one-letter codes {AMINO_ACIDS}; "
                f"'{STOP}' only as the last letter)"
            )
        object.__setattr__(self, "translate_to", protein)
        start = len(self.prefix) if self.cds_start is None else self.cds_start
        end = start + 3 * len(protein)
        if start < 0 or end > self.length:
            raise DesignError(
                f"translate_to: {len(protein)} codons ({3 * len(protein)} bp) from base {start} "
                f"do not fit in {self.length} bases"
            )
        object.__setattr__(self, "cds_start", start)
