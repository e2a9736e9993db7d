"""The id layout of a Carbon-style DNA block appended after a base BPE vocabulary.

Carbon puts three structural tokens (``<dna>``, ``</dna>``, ``<oov>``), then every k-mer in
A,T,C,G product order (first base most significant), then ``<unused_i>`` pads up to a multiple
of 128, right after the base tokenizer's vocabulary. Everything here is derived from two numbers
(the base vocabulary size and k), so the same code serves the real 155,776-token vocabulary and the
tiny test vocabularies.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cached_property

#: Base alphabet in vocabulary order. NOT A,C,G,T: the digit of a base is its index here.
BASES = "ATCG"
DNA_SPECIAL_TOKENS = ("<dna>", "</dna>", "<oov>")
VOCAB_MULTIPLE = 128


@dataclass(frozen=True)
class DnaLayout:
    """Where the DNA tokens live in the vocabulary.

    ``dna_start_id`` equals the size of the base (BPE + added tokens) vocabulary; the real Carbon
    value is 151,669.
    """

    dna_start_id: int
    k: int = 6
    special_tokens: tuple[str, ...] = field(default=DNA_SPECIAL_TOKENS)

    def __post_init__(self) -> None:
        if self.k < 1 or self.k > 12:
            raise ValueError(f"k must be between 1 and 12, got {self.k}")
        if self.dna_start_id < 0:
            raise ValueError(f"dna_start_id must be >= 0, got {self.dna_start_id}")
        if tuple(self.special_tokens[:3]) != DNA_SPECIAL_TOKENS:
            raise ValueError(
                f"dna_special_tokens must start with {list(DNA_SPECIAL_TOKENS)}, got {list(self.special_tokens)}"
            )

    # ids of the structural tokens
    @property
    def begin_id(self) -> int:
        return self.dna_start_id

    @property
    def end_id(self) -> int:
        return self.dna_start_id + 1

    @property
    def oov_id(self) -> int:
        return self.dna_start_id + 2

    @property
    def n_kmers(self) -> int:
        return 4**self.k

    @property
    def kmer_start(self) -> int:
        """Id of the first k-mer (``AAAAAA``)."""
        return self.dna_start_id + len(self.special_tokens)

    @property
    def kmer_stop(self) -> int:
        """One past the id of the last k-mer (``GGGGGG``)."""
        return self.kmer_start + self.n_kmers

    @property
    def vocab_size(self) -> int:
        """Total vocabulary: base + DNA block, rounded up to a multiple of 128."""
        unpadded = self.kmer_stop
        return -(-unpadded // VOCAB_MULTIPLE) * VOCAB_MULTIPLE

    @property
    def n_unused(self) -> int:
        return self.vocab_size - self.kmer_stop

    @property
    def dna_vocab_size(self) -> int:
        """Size of the DNA block as written in ``dna_config.json`` (4,107 for Carbon)."""
        return self.vocab_size - self.dna_start_id

    @cached_property
    def kmers(self) -> tuple[str, ...]:
        """Every k-mer in vocabulary order."""
        return tuple("".join(p) for p in itertools.product(BASES, repeat=self.k))

    def unused_tokens(self) -> list[str]:
        return [f"<unused_{i}>" for i in range(self.n_unused)]

    def is_kmer(self, token_id: int) -> bool:
        return self.kmer_start <= token_id < self.kmer_stop

    def is_dna(self, token_id: int) -> bool:
        """True for every id in the DNA block (tags, k-mers and unused pads)."""
        return self.dna_start_id <= token_id < self.vocab_size

    def kmer_id(self, kmer: str) -> int:
        """Id of one k-mer string (upper-case ACGT, length k)."""
        if len(kmer) != self.k:
            raise ValueError(f"expected a {self.k}-mer, got {kmer!r}")
        index = 0
        for base in kmer:
            digit = BASES.find(base)
            if digit < 0:
                raise ValueError(f"{kmer!r} holds {base!r}, which is not one of A, C, G, T")
            index = index * 4 + digit
        return self.kmer_start + index

    def kmer_of(self, token_id: int) -> str:
        if not self.is_kmer(token_id):
            raise ValueError(f"token id {token_id} is not a {self.k}-mer id")
        return self.kmers[token_id - self.kmer_start]

    def dna_token_string(self, token_id: int) -> str:
        """The string of any DNA-block id: a tag, a k-mer or ``<unused_i>``."""
        offset = token_id - self.dna_start_id
        if offset < 0 or token_id >= self.vocab_size:
            raise ValueError(
                f"token id {token_id} is outside the DNA block [{self.dna_start_id}, {self.vocab_size})"
            )
        if offset < len(self.special_tokens):
            return self.special_tokens[offset]
        if token_id < self.kmer_stop:
            return self.kmers[token_id - self.kmer_start]
        return f"<unused_{token_id - self.kmer_stop}>"

    def dna_config(self, auto_dna_tags: bool = False) -> dict:
        """The ``dna_config.json`` content for this layout."""
        return {
            "k": self.k,
            "dna_start_id": self.dna_start_id,
            "dna_vocab_size": self.dna_vocab_size,
            "dna_special_tokens": list(self.special_tokens),
            "auto_dna_tags": auto_dna_tags,
        }
