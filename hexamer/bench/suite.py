"""The DNA prompt suite of the Trainium2 throughput article, built deterministically, and valid-DNA checks.

The article (Loka, "Running Hugging Face Carbon on AWS Trainium2") runs seven 1,080 bp prompts —
balanced, CpG-rich, AT-rich, GC-rich, ORF-like, TATA-box-like and a CAG triplet repeat — and reports
bp/s plus the share of the decoded output that is A/C/G/T. It names the cases but not their
sequences, so each is built here from a fixed seed and a stated rule (see :data:`CASES`), identical on
every machine. A 1,080 bp prompt is exactly 180 six-mers.

"Valid DNA" follows the article: of the bases asked for, how many came back as A/C/G/T inside the
DNA region (which ends at ``</dna>`` or at the first character that is not a base).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PROMPT_BP = 1080
_STOPS = {"TAA", "TAG", "TGA"}
_SENSE_CODONS = [a + b + c for a in "ACGT" for b in "ACGT" for c in "ACGT" if a + b + c not in _STOPS]
TATA_BOX = "TATAAAAG"  # TATAWAWR consensus
TATA_UPSTREAM = 30  # the box sits ~30 bp upstream of the transcription start (= the prompt's end)


def _draw(rng: np.random.Generator, n: int, probs: dict[str, float]) -> str:
    bases = list(probs)
    weights = np.array([probs[b] for b in bases], dtype=np.float64)
    idx = rng.choice(len(bases), size=n, p=weights / weights.sum())
    return "".join(bases[i] for i in idx)


def balanced(rng: np.random.Generator, n: int) -> str:
    """Uniform A/C/G/T."""
    return _draw(rng, n, {"A": 1, "C": 1, "G": 1, "T": 1})


def at_rich(rng: np.random.Generator, n: int) -> str:
    """75% A/T (A, T 37.5% each; C, G 12.5% each)."""
    return _draw(rng, n, {"A": 3, "C": 1, "G": 1, "T": 3})


def gc_rich(rng: np.random.Generator, n: int) -> str:
    """75% G/C."""
    return _draw(rng, n, {"A": 1, "C": 3, "G": 3, "T": 1})


def cpg_rich(rng: np.random.Generator, n: int) -> str:
    """A CpG island: at each step a ``CG`` dinucleotide with probability 1/2, else one base at 65% GC
    (observed/expected CpG far above 0.6, the island criterion)."""
    parts: list[str] = []
    size = 0
    while size < n:
        unit = "CG" if rng.random() < 0.5 else _draw(rng, 1, {"A": 0.175, "C": 0.325, "G": 0.325, "T": 0.175})
        parts.append(unit)
        size += len(unit)
    return "".join(parts)[:n]


def orf_like(rng: np.random.Generator, n: int) -> str:
    """An open reading frame: ``ATG``, random sense codons (no in-frame stop), a final ``TAA``; the
    frame starts at base 0 (lengths that are not a multiple of 3 end with a partial codon)."""
    n_codons = max(0, (n - 6) // 3)
    body = "".join(_SENSE_CODONS[i] for i in rng.integers(0, len(_SENSE_CODONS), n_codons))
    seq = "ATG" + body + "TAA"
    if len(seq) < n:
        seq += balanced(rng, n - len(seq))
    return seq[:n]


def tata_box_like(rng: np.random.Generator, n: int) -> str:
    """A core promoter: 60% A/T background with the TATA box ``TATAAAAG`` 30 bp before the prompt's end
    (the transcription start), so generation begins where a transcript would."""
    seq = list(_draw(rng, n, {"A": 3, "C": 2, "G": 2, "T": 3}))
    at = max(0, n - TATA_UPSTREAM - len(TATA_BOX))
    box = TATA_BOX[: n - at]
    seq[at : at + len(box)] = box
    return "".join(seq)


def cag_repeat(rng: np.random.Generator, n: int) -> str:
    """The polyglutamine-expansion stress case: ``CAG`` repeated (1,080 bp = 360 repeats)."""
    del rng
    return ("CAG" * (n // 3 + 1))[:n]


#: The seven cases in the article's order: name -> builder(rng, length).
CASES: dict[str, Callable[[np.random.Generator, int], str]] = {
    "balanced": balanced,
    "CpG-rich": cpg_rich,
    "AT-rich": at_rich,
    "GC-rich": gc_rich,
    "ORF-like": orf_like,
    "TATA-box-like": tata_box_like,
    "CAG-repeat": cag_repeat,
}


@dataclass(frozen=True)
class SuitePrompt:
    case: str
    sequence: str


def suite_prompt(case: str, length: int = PROMPT_BP, seed: int = 0) -> SuitePrompt:
    """One prompt of ``case``; the same (case, length, seed) gives the same bases everywhere."""
    if case not in CASES:
        raise ValueError(f"unknown prompt case {case!r}; choose from {list(CASES)}")
    if length < 1:
        raise ValueError(f"prompt length must be positive, got {length}")
    index = list(CASES).index(case)
    rng = np.random.default_rng([seed, index])
    return SuitePrompt(case, CASES[case](rng, length))


def suite_prompts(n: int, length: int = PROMPT_BP, seed: int = 0) -> list[SuitePrompt]:
    """``n`` prompts cycling through the seven cases (prompt ``i`` is case ``i % 7``); repeats of a
    random case get a different seed so a batch holds no duplicates (the CAG repeat is fixed)."""
    names = list(CASES)
    return [suite_prompt(names[i % len(names)], length, seed + i // len(names)) for i in range(n)]


@dataclass(frozen=True)
class ValidDNA:
    requested_bp: int
    valid_bp: int  # A/C/G/T inside the DNA region, at most requested_bp
    region_bp: int  # characters of the DNA region (up to ``</dna>`` or the first non-base)

    @property
    def fraction(self) -> float:
        return self.valid_bp / self.requested_bp if self.requested_bp else 1.0

    @property
    def exact(self) -> bool:
        """Exactly the requested number of bases, all A/C/G/T."""
        return self.valid_bp == self.requested_bp == self.region_bp


_BASE_CHARS = frozenset("ACGTNacgtn")


def valid_dna(output: str, requested_bp: int) -> ValidDNA:
    """Account one generated continuation: how many of the ``requested_bp`` bases are A/C/G/T.

    The DNA region is the output up to ``</dna>`` or the first character that is not a base letter
    (text or a tag such as ``<oov>``); bases beyond the requested length are not counted, and
    lower-case or N bases are not valid.
    """
    if requested_bp < 0:
        raise ValueError(f"requested_bp must be >= 0, got {requested_bp}")
    end = len(output)
    for i, ch in enumerate(output):
        if ch not in _BASE_CHARS:
            end = i
            break
    region = output[:end]
    valid = sum(region[:requested_bp].count(b) for b in "ACGT")
    return ValidDNA(requested_bp=requested_bp, valid_bp=valid, region_bp=len(region))


def kmer_ids_to_text(
    ids: list[int], kmer_start: int, kmers: tuple[str, ...], other: Callable[[int], str]
) -> str:
    """Decode generated ids: 6-mers become their bases, anything else ``other(id)`` (e.g. ``</dna>``)."""
    out: list[str] = []
    stop = kmer_start + len(kmers)
    for i in ids:
        out.append(kmers[i - kmer_start] if kmer_start <= i < stop else other(i))
    return "".join(out)
