"""Hard constraints compiled for decoding: the allowed bases at the next position of a partial
sequence, exact per constraint and feasible for the rest of the sequence.

* mask, prefix, suffix, motifs and the codons of ``translate_to`` fold into one base set per
  position (a codon's next base also depends on the codon's earlier bases);
* forbidden patterns (both strands) and the homopolymer limit are checked on the bases just
  decoded: a base is refused when it would complete a forbidden word;
* GC rules are exact for the rest of the sequence (:class:`~hexamer.design.gc.GcPlan`);
* where the rules interact (a pattern, a homopolymer or codons next to GC bounds) every partial
  sequence carries a *witness*, one complete sequence that extends it and meets every rule. A base
  the witness has is always safe; any other base is taken only once :meth:`ConstraintSet.repair`
  finds a new witness for it (depth-first search that follows the old witness and stops as soon as
  it rejoins it), so decoding never walks into a dead end and never backtracks.

Unsatisfiable sets are found before decoding and named (:func:`compile_constraints`).
"""

from __future__ import annotations

import numpy as np

from hexamer.design.codons import codons_for
from hexamer.design.gc import GcPlan, count_bounds
from hexamer.design.iupac import ALL, BASES, GC_BITS, complement_bits, parse_iupac
from hexamer.design.spec import DesignConstraints, DesignError, UnsatisfiableError

__all__ = ["ConstraintSet", "Partial", "compile_constraints"]

_AT_BITS = ALL & ~GC_BITS


class Partial:
    """A partial sequence being decoded: base codes (ATCG order) and G/C prefix counts."""

    __slots__ = ("codes", "counts")

    def __init__(self, length: int) -> None:
        self.codes: list[int] = []
        self.counts = np.zeros(length + 1, dtype=np.int64)

    def push(self, base: int) -> None:
        i = len(self.codes)
        self.codes.append(base)
        self.counts[i + 1] = self.counts[i] + (1 if base >= 2 else 0)

    def pop(self) -> None:
        self.codes.pop()

    def copy(self) -> Partial:
        out = Partial(len(self.counts) - 1)
        out.codes = list(self.codes)
        out.counts = self.counts.copy()
        return out

    def __len__(self) -> int:
        return len(self.codes)

    def text(self) -> str:
        return "".join(BASES[b] for b in self.codes)


def _words(spec: DesignConstraints) -> list[tuple[str, tuple[int, ...]]]:
    """Forbidden words on the top strand: each pattern and its reverse complement (once if equal)."""
    out = []
    for name, pattern in spec.patterns:
        bits = tuple(parse_iupac(pattern, name))
        rc = tuple(complement_bits(b) for b in reversed(bits))
        out.append((name, bits))
        if rc != bits:
            out.append((name, rc))
    return out


class ConstraintSet:
    """Compiled :class:`DesignConstraints`: ``allowed(partial)`` is the next position's base set."""

    def __init__(self, spec: DesignConstraints) -> None:
        self.spec = spec
        n = self.length = spec.length
        mask = [ALL] * n
        for i, bits in enumerate(parse_iupac(spec.mask, "mask") if spec.mask else []):
            mask[i] &= bits
        for start, seq in [(0, spec.prefix), (n - len(spec.suffix), spec.suffix), *spec.motifs]:
            for i, bits in enumerate(parse_iupac(seq, "segment") if seq else []):
                mask[start + i] &= bits
        empty = [i for i, bits in enumerate(mask) if not bits]
        if empty:
            raise UnsatisfiableError("mask/prefix/suffix/motifs", f"position {empty[0]} allows no base")
        self.mask = mask
        self.codon_next: dict[int, dict[tuple[int, ...], int]] = {}
        self._fold_codons()
        self.words = _words(spec)
        self.max_word = max((len(w) for _, w in self.words), default=0)
        self._plain_words = [w for _, w in self.words]
        self.homopolymer = spec.max_homopolymer
        self.gc_plan = self._gc_plan()
        #: whether per-constraint allowed sets can still dead-end together (then witnesses are kept)
        self.interacting = bool(self.words) or self.homopolymer is not None
        self.interacting |= self.gc_plan is not None and spec.translate_to is not None
        #: how many equal trailing bases make two partial sequences interchangeable for every
        #: pattern, run and codon still to come (GC windows are checked apart: :meth:`_joins`)
        self.memory = max(1, self.max_word, (self.homopolymer or 0) + 1, 3 if spec.translate_to else 0)
        self._static_checks()
        self._witness: list[int] | None = None

    # ------------------------------------------------------------------ compilation
    def _fold_codons(self) -> None:
        spec = self.spec
        if spec.translate_to is None or spec.cds_start is None:
            return
        for c, aa in enumerate(spec.translate_to):
            at = spec.cds_start + 3 * c
            options = [tuple(BASES.index(x) for x in codon) for codon in codons_for(aa)]
            options = [o for o in options if all(self.mask[at + j] >> o[j] & 1 for j in range(3))]
            if not options:
                raise UnsatisfiableError(
                    "translate_to",
                    f"codon {c + 1} ({aa}, bases {at}-{at + 2}) meets none of its codons "
                    f"{', '.join(codons_for(aa))} under the mask and fixed segments",
                )
            for j in range(3):
                union = 0
                for o in options:
                    union |= 1 << o[j]
                    self.codon_next.setdefault(at + j, {})
                    key = o[:j]
                    self.codon_next[at + j][key] = self.codon_next[at + j].get(key, 0) | 1 << o[j]
                self.mask[at + j] &= union

    def _gc_plan(self) -> GcPlan | None:
        spec = self.spec
        if spec.gc is None:
            return None
        n = self.length
        can_gc = [bool(m & GC_BITS) for m in self.mask]
        can_at = [bool(m & _AT_BITS) for m in self.mask]
        total = count_bounds(*spec.gc, n)
        w = spec.gc_window
        wb = count_bounds(*spec.gc, w) if w is not None else None
        self.window_counts = wb or (0, 0)
        if total[0] > total[1] or (wb is not None and wb[0] > wb[1]):
            what = "gc" if total[0] > total[1] else "gc window"
            raise UnsatisfiableError(what, f"no whole number of G/C bases lies in the range {spec.gc}")
        try:
            plan = GcPlan(can_gc, can_at, total, w, wb)
        except ValueError as exc:  # too long for the installed solver
            raise DesignError(str(exc)) from None
        if plan.feasible:
            return plan
        alone = GcPlan(can_gc, can_at, total, None, None).feasible
        name = "gc window" if alone else "gc"
        raise UnsatisfiableError(
            name, f"G+C in {spec.gc} cannot hold with the mask, fixed segments and codons"
        )

    def _static_checks(self) -> None:
        """Rules broken by the fixed positions alone, named before any decoding."""
        m = self.mask
        for name, word in self.words:
            for s in range(self.length - len(word) + 1):
                if all(m[s + t] & ~word[t] == 0 for t in range(len(word))):
                    raise UnsatisfiableError(name, f"the fixed bases force it at position {s}")
        h = self.homopolymer
        if h is not None:
            for s in range(self.length - h):
                run = m[s : s + h + 1]
                if run[0] in (1, 2, 4, 8) and all(x == run[0] for x in run):
                    raise UnsatisfiableError(
                        "max_homopolymer", f"fixed bases force a run of {h + 1} at position {s}"
                    )

    # ------------------------------------------------------------------ decoding
    def allowed(self, p: Partial) -> int:
        """Bases (bit set) the next position may take: every rule holds and GC stays feasible."""
        i = len(p.codes)
        bits = self.mask[i]
        table = self.codon_next.get(i)
        if table is not None:
            bits &= table.get(tuple(p.codes[i - (i - self.spec.cds_start) % 3 : i]), 0)
        h = self.homopolymer
        if h is not None and i >= h:
            last = p.codes[i - 1]
            if all(b == last for b in p.codes[i - h : i]):
                bits &= ~(1 << last)
        if self.words and bits:
            bits = self._without_words(p.codes, i, bits)
        if self.gc_plan is not None and bits:
            gc_ok, at_ok = self.gc_plan.feasible_next(p.counts, i)
            if not gc_ok:
                bits &= ~GC_BITS
            if not at_ok:
                bits &= GC_BITS
        return bits

    def _without_words(self, codes: list[int], i: int, bits: int) -> int:
        for word in self._plain_words:
            m = len(word)
            if m > i + 1 or not bits & word[-1]:
                continue
            for t in range(m - 2, -1, -1):  # from the end: most words fail on their last bases
                if not word[t] >> codes[i - m + 1 + t] & 1:
                    break
            else:
                bits &= ~word[-1]
        return bits

    def repair(self, p: Partial, guide: list[int], budget: int | None = None) -> list[int] | None:
        """A complete sequence meeting every rule that extends ``p``, whose last base differs from
        the witness ``guide`` (a complete valid sequence agreeing with ``p`` before that base); None
        when the search finds none within ``budget`` nodes.

        Depth-first: at each position prefer the base that brings the G/C count back to the
        guide's, then the guide's own base. As soon as the last :attr:`memory` bases equal the
        guide's (all after the differing one), every pattern, run and codon still to come is the
        guide's; when also the G/C counts agree and every GC window across position ``i`` holds
        (:meth:`_joins`), the guide's tail completes the sequence.
        """
        n, start, k = self.length, len(p), self.memory
        g_counts = np.concatenate([[0], np.cumsum(np.asarray(guide) >= 2)])
        swapped = [*p.codes, *guide[start:]]
        if self._valid_swap(swapped, start - 1, g_counts):
            return swapped
        depth0, tried = start, [0] * (n - start + 1)
        left = 64 * n if budget is None else budget
        try:
            while True:
                i = len(p)
                if i == n:
                    return list(p.codes)
                if i - k >= start and p.codes[i - k : i] == guide[i - k : i] and self._joins(p, g_counts, i):
                    return p.codes + guide[i:]
                bits = self.allowed(p) & ~tried[i - depth0]
                if bits and left > 0:
                    diff = int(p.counts[i] - g_counts[i]) - (1 if guide[i] >= 2 else 0)
                    b = min(
                        (b for b in range(4) if bits >> b & 1),
                        key=lambda b: (abs(diff + (b >= 2)), b != guide[i], b),
                    )
                    tried[i - depth0] |= 1 << b
                    p.push(b)
                    left -= 1
                    continue
                if i == start or left <= 0:
                    return None
                tried[i - depth0] = 0
                p.pop()
        finally:
            del p.codes[start:]

    def _valid_swap(self, seq: list[int], i: int, g_counts: np.ndarray) -> bool:
        """Whether ``seq`` — the guide with base ``i`` changed — still meets every rule; only what
        can see position ``i`` is checked (the common, cheap case of :meth:`repair`)."""
        n = self.length
        table = self.codon_next.get(i)
        if table is not None:  # the rest of the codon must still continue a synonymous codon
            c0 = i - (i - self.spec.cds_start) % 3
            for j in range(i + 1, c0 + 3):
                if not self.codon_next[j].get(tuple(seq[c0:j]), 0) >> seq[j] & 1:
                    return False
        for e in range(i, min(n, i + self.max_word)):
            if self.words and not self._without_words(seq, e, 1 << seq[e]):
                return False
        h = self.homopolymer
        if h is not None:
            a = i
            while a > 0 and seq[a - 1] == seq[i]:
                a -= 1
            b = i
            while b + 1 < n and seq[b + 1] == seq[i]:
                b += 1
            if b - a + 1 > h:
                return False
        if self.gc_plan is None:
            return True
        delta = (seq[i] >= 2) - int(g_counts[i + 1] - g_counts[i])
        if delta == 0:
            return True
        assert self.spec.gc is not None
        tlo, thi = count_bounds(*self.spec.gc, n)
        if not tlo <= g_counts[n] + delta <= thi:
            return False
        w = self.spec.gc_window
        if w is None:
            return True
        lo, hi = self.window_counts
        starts = np.arange(max(0, i - w + 1), min(i, n - w) + 1)
        sums = g_counts[starts + w] - g_counts[starts] + delta
        return bool(((sums >= lo) & (sums <= hi)).all())

    def _joins(self, p: Partial, g_counts: np.ndarray, i: int) -> bool:
        """Whether ``p`` followed by the guide's bases from ``i`` on meets the GC rules: equal G/C
        counts at ``i`` keep the total and every later window; windows across ``i`` are counted."""
        if self.gc_plan is None:
            return True
        if p.counts[i] != g_counts[i]:
            return False
        w = self.spec.gc_window
        if w is None:
            return True
        lo, hi = self.window_counts
        starts = np.arange(max(0, i - w + 1), min(i, self.length - w + 1))
        sums = g_counts[starts + w] - p.counts[starts]
        return bool(((sums >= lo) & (sums <= hi)).all())

    def witness(self, budget: int | None = None) -> str:
        """One sequence meeting every constraint (depth-first search), or :class:`UnsatisfiableError`
        when none is found within ``budget`` nodes. The search keeps the G+C fraction near the middle
        of its range and rotates bases, so the witness sits away from every bound: a sampled base
        that differs from it then usually needs only a short :meth:`repair`."""
        p = Partial(self.length)
        tried: list[int] = []  # bases already tried at each depth (bit set)
        left = 200 * self.length if budget is None else budget
        while len(p) < self.length:
            i = len(p)
            if len(tried) <= i:
                tried.append(0)
            bits = self.allowed(p) & ~tried[i]
            if bits and left > 0:
                b = min((b for b in range(4) if bits >> b & 1), key=lambda b: self._centred(p, i, b))
                tried[i] |= 1 << b
                p.push(b)
                left -= 1
                continue
            if i == 0 or left <= 0:
                names = self.names()
                raise UnsatisfiableError(
                    " + ".join(names),
                    "no sequence meets all of them together"
                    + ("" if left > 0 else f" (search stopped after {200 * self.length} steps)"),
                )
            tried.pop()
            p.pop()
        self._witness = list(p.codes)
        return p.text()

    def _centred(self, p: Partial, i: int, b: int) -> tuple[bool, int]:
        """Witness base order: the G/C class that moves toward the middle of the GC range first,
        then a rotation over the four bases (no long runs, no fixed words)."""
        lo, hi = self.spec.gc if self.spec.gc is not None else (0.5, 0.5)
        want_gc = p.counts[i] < (lo + hi) / 2 * (i + 1)
        return (b >= 2) != want_gc, (b - i) % 4

    def first_witness(self) -> list[int]:
        """The codes of :meth:`witness` (computed once): the witness of the empty sequence."""
        if self._witness is None:
            self.witness()
        assert self._witness is not None
        return list(self._witness)

    def names(self) -> list[str]:
        """The active constraints, as result tables name them."""
        s = self.spec
        out = ["length"]
        if any(m != ALL for m in self.mask):
            out.append("mask")
        out += [name for name, _ in s.patterns]
        if s.max_homopolymer is not None:
            out.append("max_homopolymer")
        if s.gc is not None:
            out.append("gc")
            if s.gc_window is not None:
                out.append("gc_window")
        if s.translate_to is not None:
            out.append("translate_to")
        return out


def compile_constraints(spec: DesignConstraints) -> ConstraintSet:
    """Compile and prove satisfiable: raises :class:`UnsatisfiableError` naming the constraint (or
    the combination) that cannot be met, before any model work."""
    cs = ConstraintSet(spec)
    cs.witness()
    return cs
