"""IUPAC nucleotide codes as base sets: the one place design code turns letters into bit masks.

Bases are numbered in the vocabulary's ATCG order (A=0, T=1, C=2, G=3, as in :mod:`hexamer.fns`),
and a set of bases is a 4-bit integer (bit b set = base b allowed).
"""

from __future__ import annotations

__all__ = [
    "ALL",
    "BASES",
    "CODE_BITS",
    "GC_BITS",
    "bits_of",
    "complement_bits",
    "parse_iupac",
    "reverse_complement_iupac",
]

#: base letters by index (ATCG order)
BASES = "ATCG"
ALL = 0b1111
#: bits of C and G
GC_BITS = (1 << 2) | (1 << 3)

_SETS = {
    "A": "A", "C": "C", "G": "G", "T": "T", "U": "T",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG", "N": "ACGT",
}  # fmt: skip
#: bit mask of every IUPAC letter
CODE_BITS = {code: sum(1 << BASES.index(b) for b in bases) for code, bases in _SETS.items()}
_COMPLEMENT = {"A": "T", "T": "A", "C": "G", "G": "C"}
_BITS_TO_CODE = {bits: code for code, bits in CODE_BITS.items() if code != "U"}


def bits_of(code: str) -> int:
    """The base set of one IUPAC letter (case-insensitive); ``KeyError`` for anything else."""
    return CODE_BITS[code.upper()]


def parse_iupac(text: str, what: str) -> list[int]:
    """Base sets of an IUPAC string, or ``ValueError`` naming ``what`` and the first bad letter."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"{what}: must be a non-empty IUPAC string")
    out = []
    for i, ch in enumerate(text):
        bits = CODE_BITS.get(ch.upper())
        if bits is None:
            raise ValueError(
                f"{what}: position {i + 1}: {ch!r} is not an IUPAC nucleotide code "
                "(use A C G T U R Y S W K M B D H V N)"
            )
        out.append(bits)
    return out


def complement_bits(bits: int) -> int:
    """The complement of a base set (A<->T, C<->G)."""
    out = 0
    for b, base in enumerate(BASES):
        if bits >> b & 1:
            out |= 1 << BASES.index(_COMPLEMENT[base])
    return out


def reverse_complement_iupac(text: str) -> str:
    """Reverse complement of an IUPAC string (``GGTCTC`` -> ``GAGACC``, ``R`` -> ``Y``)."""
    return "".join(_BITS_TO_CODE[complement_bits(b)] for b in reversed(parse_iupac(text, "pattern")))
