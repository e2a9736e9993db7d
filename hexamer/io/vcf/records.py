"""One VCF record and its ALT alleles as :class:`Variant` rows, each with its kind.

A record of several ALTs becomes several variants that keep their record index
(``alt_index`` 0, 1, ...); a REF or ALT that is not nucleotides makes a variant with an
``error``, a kind the recipes cannot score one with a ``skip`` reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALT_EQUALS_REF", "KINDS", "Variant", "VcfRecord", "classify"]

#: Variant kinds; ``none`` is no sequence change: a record without an ALT allele (ALT ``.``), or
#: an ALT equal to REF.
KINDS = ("SNV", "MNV", "insertion", "deletion", "complex", "symbolic", "none")

_NUCLEOTIDES = re.compile(r"^[ACGTN]+$")
#: The reason of a ``skipped`` row whose ALT equals its REF (``hexamer vep`` and ``/v1/dna/vep``).
ALT_EQUALS_REF = "ALT equals REF: no sequence change to score"


@dataclass(frozen=True, slots=True)
class Variant:
    """One ALT allele of one input record.

    ``record`` is the 0-based index of the record among all data lines of the input (malformed ones
    included), ``alt_index`` the 0-based index of the allele in ALT; together they are the key of
    an output row. ``ref``/``alt`` are upper-cased; ``pos`` is the 1-based VCF position.
    """

    record: int
    alt_index: int
    chrom: str
    pos: int
    ref: str
    alt: str
    id: str
    kind: str
    error: str | None = None  # malformed input: the row's status is "failed"
    skip: str | None = None  # not a scorable sequence change: the row's status is "skipped"

    @property
    def key(self) -> tuple[int, int]:
        return (self.record, self.alt_index)

    @property
    def start(self) -> int:
        """0-based position of the first REF base."""
        return self.pos - 1


@dataclass(slots=True)
class VcfRecord:
    """One data line of the input; ``problem`` is set when it could not be parsed.

    ``line`` is the 1-based line number in the file (text VCF only). ``record`` is the pysam
    record when the reader was asked to keep it (for writing the annotated VCF), and ``text`` the
    line as written beside it (text VCF only): htslib reads a malformed number as missing.
    """

    index: int
    chrom: str
    pos: int
    id: str
    ref: str
    alts: tuple[str, ...]
    line: int | None = None
    problem: str | None = None
    record: Any = field(default=None, repr=False)
    text: str | None = field(default=None, repr=False)

    def variants(self) -> list[Variant]:
        """One :class:`Variant` per ALT allele (one row with ALT ``.`` when there is none)."""
        if self.problem is not None:
            return [
                Variant(self.index, 0, self.chrom, self.pos, self.ref, "", self.id, "", error=self.problem)
            ]
        ref_error = _allele_problem(self.ref, "REF")
        if self.pos < 1:
            ref_error = f"POS {self.pos} is not a 1-based position"
        out = []
        for j, alt in enumerate(self.alts or (".",)):
            kind, skip = classify(self.ref, alt)
            error = ref_error
            if error is None and skip is None:
                error = _allele_problem(alt, "ALT")
            if error is not None:
                skip = None
            out.append(
                Variant(self.index, j, self.chrom, self.pos, self.ref, alt, self.id, kind, error, skip)
            )
        return out


def _allele_problem(allele: str, what: str) -> str | None:
    if not allele or allele == ".":
        return f"{what} allele is missing"
    if not _NUCLEOTIDES.match(allele):
        bad = next(c for c in allele if c not in "ACGTN")
        return f"{what} allele {allele!r} holds {bad!r}, not a nucleotide (A, C, G, T, N)"
    return None


def classify(ref: str, alt: str) -> tuple[str, str | None]:
    """``(kind, reason)``: the variant kind, and why it is not a sequence change to score (or None).

    Equal lengths: SNV (1 base) or MNV. Otherwise the shared leading and then trailing bases are
    trimmed (the VCF anchor base): nothing left of REF is an insertion, of ALT a deletion, else
    complex. Symbolic alleles (``<DEL>``), breakends, ``*`` and a missing ALT are not sequences;
    an ALT equal to REF changes nothing (its windows would be identical and score exactly 0.0).
    """
    ref, alt = ref.upper(), alt.upper()
    if alt in (".", ""):
        return "none", "no ALT allele (ALT is '.')"
    if alt == ref:
        return "none", ALT_EQUALS_REF
    if alt == "*":
        return "symbolic", "'*' allele (overlapping deletion) has no sequence to score"
    if alt.startswith("<"):
        return "symbolic", f"symbolic allele {alt} has no sequence to score"
    if "[" in alt or "]" in alt or alt.startswith(".") or alt.endswith("."):
        return "symbolic", f"breakend {alt} has no sequence to score"
    if len(ref) == len(alt):
        kind = "SNV" if len(ref) == 1 else "MNV"
    else:
        head = 0
        while head < min(len(ref), len(alt)) and ref[head] == alt[head]:
            head += 1
        r, a = ref[head:], alt[head:]
        tail = 0
        while tail < min(len(r), len(a)) and r[-1 - tail] == a[-1 - tail]:
            tail += 1
        r, a = r[: len(r) - tail], a[: len(a) - tail]
        kind = "insertion" if not r else "deletion" if not a else "complex"
    return kind, None


# --------------------------------------------------------------------------- VCF reading
