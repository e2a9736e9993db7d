"""Measuring a finished sequence against its constraints: one result per rule, written plainly and
separately from the decoding code (regular expressions over both strands, direct counts), so it can
serve as an independent check; ``allows_edit`` is the cheap local version for edit-based search."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hexamer.design.codons import translate
from hexamer.design.iupac import CODE_BITS, reverse_complement_iupac
from hexamer.design.spec import DesignConstraints

__all__ = ["ConstraintResult", "SpecEditConstraints", "allows_edit", "check", "gc_fraction"]

_CLASS = {
    code: "[" + "".join(b for b in "ACGT" if bits >> "ATCG".index(b) & 1) + "]"
    for code, bits in CODE_BITS.items()
}


@dataclass(frozen=True)
class ConstraintResult:
    """One rule measured on one sequence: ``value`` is what was measured, ``passed`` whether it holds."""

    name: str
    value: object
    passed: bool


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile("(?=(" + "".join(_CLASS[c] for c in pattern.upper()) + "))")


def _count(pattern: str, seq: str) -> int:
    """Occurrences of an IUPAC pattern on either strand (a palindrome's once)."""
    hits = {m.start() for m in _regex(pattern).finditer(seq)}
    rc = reverse_complement_iupac(pattern)
    hits |= {m.start() for m in _regex(rc).finditer(seq)}
    return len(hits)


def _longest_run(seq: str) -> int:
    return max((len(m.group(0)) for m in re.finditer(r"(.)\1*", seq)), default=0)


def gc_fraction(seq: str) -> float:
    """G+C fraction of ``seq`` (0 for an empty one)."""
    return (seq.count("G") + seq.count("C")) / len(seq) if seq else 0.0


def _matches(seq: str, start: int, iupac: str) -> bool:
    return all(
        ch in _CLASS[code] for ch, code in zip(seq[start : start + len(iupac)], iupac.upper(), strict=True)
    )


def check(spec: DesignConstraints, seq: str) -> list[ConstraintResult]:
    """Every constraint of ``spec`` measured on ``seq`` (upper-case ACGT)."""
    seq = seq.upper()
    n = spec.length
    out = [ConstraintResult("length", len(seq), len(seq) == n)]
    if len(seq) != n:
        return out
    if spec.mask:
        out.append(ConstraintResult("mask", spec.mask, _matches(seq, 0, spec.mask)))
    if spec.prefix:
        out.append(ConstraintResult("prefix", seq[: len(spec.prefix)], _matches(seq, 0, spec.prefix)))
    if spec.suffix:
        at = n - len(spec.suffix)
        out.append(ConstraintResult("suffix", seq[at:], _matches(seq, at, spec.suffix)))
    for pos, motif in spec.motifs:
        got = seq[pos : pos + len(motif)]
        out.append(ConstraintResult(f"motif {motif}@{pos}", got, _matches(seq, pos, motif)))
    for name, pattern in spec.patterns:
        hits = _count(pattern, seq)
        out.append(ConstraintResult(name, hits, hits == 0))
    if spec.max_homopolymer is not None:
        run = _longest_run(seq)
        out.append(ConstraintResult("max_homopolymer", run, run <= spec.max_homopolymer))
    if spec.gc is not None:
        lo, hi = spec.gc
        g = (seq.count("G") + seq.count("C")) / n
        out.append(ConstraintResult("gc", round(g, 6), lo - 1e-9 <= g <= hi + 1e-9))
        w = spec.gc_window
        if w is not None:
            fr = [gc_fraction(seq[s : s + w]) for s in range(n - w + 1)]
            ok = all(lo - 1e-9 <= f <= hi + 1e-9 for f in fr)
            out.append(ConstraintResult("gc_window", (round(min(fr), 6), round(max(fr), 6)), ok))
    if spec.translate_to is not None and spec.cds_start is not None:
        cds = seq[spec.cds_start : spec.cds_start + 3 * len(spec.translate_to)]
        protein = translate(cds)
        out.append(ConstraintResult("translate_to", protein, protein == spec.translate_to))
    return out


def allows_edit(spec: DesignConstraints, seq: str, pos: int, base: str) -> bool:
    """Whether ``seq`` (which meets ``spec``) still does with ``seq[pos]`` replaced by ``base``:
    only the rules that can see ``pos`` are measured (patterns and runs around it, the GC windows
    that hold it, the codon it is in), so one call costs O(window + pattern length)."""
    seq = seq.upper()
    n = len(seq)
    if not 0 <= pos < n or base.upper() not in "ACGT":
        return False
    new = seq[:pos] + base.upper() + seq[pos + 1 :]
    fixed = [(0, spec.mask or ""), (0, spec.prefix), (n - len(spec.suffix), spec.suffix), *spec.motifs]
    for start, iupac in fixed:
        if start <= pos < start + len(iupac) and new[pos] not in _CLASS[iupac[pos - start].upper()]:
            return False
    reach = max((len(p) for _, p in spec.patterns), default=0)
    if reach:
        lo, hi = max(0, pos - reach + 1), min(n, pos + reach)
        before = sum(_count(p, seq[lo:hi]) for _, p in spec.patterns)
        if sum(_count(p, new[lo:hi]) for _, p in spec.patterns) > before:
            return False
    h = spec.max_homopolymer
    if h is not None and _longest_run(new[max(0, pos - h) : pos + h + 1]) > h:
        return False
    if spec.gc is not None and not _gc_edit_ok(spec, new, pos):
        return False
    if spec.translate_to is not None and spec.cds_start is not None:
        c = (pos - spec.cds_start) // 3
        if 0 <= c < len(spec.translate_to):
            at = spec.cds_start + 3 * c
            return translate(new[at : at + 3]) == spec.translate_to[c]
    return True


def _gc_edit_ok(spec: DesignConstraints, new: str, pos: int) -> bool:
    assert spec.gc is not None
    lo, hi = spec.gc
    if not lo - 1e-9 <= gc_fraction(new) <= hi + 1e-9:
        return False
    w = spec.gc_window
    if w is None:
        return True
    for s in range(max(0, pos - w + 1), min(pos, len(new) - w) + 1):
        if not lo - 1e-9 <= gc_fraction(new[s : s + w]) <= hi + 1e-9:
            return False
    return True


@dataclass(frozen=True)
class SpecEditConstraints:
    """A :class:`DesignConstraints` as the hard constraints of oracle-guided optimisation
    (:class:`hexamer.design.optimise.EditConstraints`): evolution, annealing and minimal edits ask
    :func:`allows_edit` before each substitution and :func:`check` has the final word."""

    spec: DesignConstraints

    def allows_edit(self, seq: str, pos: int, base: str) -> bool:
        return allows_edit(self.spec, seq, pos, base)

    def satisfied(self, seq: str) -> bool:
        return len(seq) == self.spec.length and all(r.passed for r in check(self.spec, seq))
