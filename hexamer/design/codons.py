"""The standard genetic code (NCBI translation table 1), for ``translate_to``."""

from __future__ import annotations

__all__ = ["AMINO_ACIDS", "STOP", "codons_for", "translate"]

_B = "TCAG"
_AA = "FFLLSSSSYY**CC*WLLLLPPPPHHQQRRRRIIIMTTTTNNKKSSRRVVVVAAAADDEEGGGG"
#: codon -> amino acid (one letter; ``*`` = stop), NCBI table 1
CODE = {
    a + b + c: _AA[16 * i + 4 * j + k]
    for i, a in enumerate(_B)
    for j, b in enumerate(_B)
    for k, c in enumerate(_B)
}
STOP = "*"
#: the 20 amino acids a protein may contain (plus a final ``*``)
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


def codons_for(aa: str) -> list[str]:
    """Every codon of amino acid ``aa`` (``*``: the stop codons), sorted."""
    return sorted(c for c, a in CODE.items() if a == aa)


def translate(cds: str) -> str:
    """Protein of a coding sequence (whole codons; ``X`` for a codon with a non-ACGT letter)."""
    return "".join(CODE.get(cds[i : i + 3].upper(), "X") for i in range(0, len(cds) - len(cds) % 3, 3))
