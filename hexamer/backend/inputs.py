"""Model inputs from user text: the one place that turns prompts and DNA sequences into token ids.

Every backend (local or served) and every pipeline builds its inputs here, so a sequence means the
same tokens wherever it is scored:

* :func:`parse_prompt`: a generation prompt -> token ids ending on a 6-mer boundary, plus the
  partial last 6-mer that generation must force;
* :func:`dna_inputs`: ``prefix + <dna>sequence`` -> ids, where the DNA starts, the target 6-mers
  and how many real bases each holds (scoring);
* :func:`next_base_ids`: ``<dna>context`` for a next-base read (``context`` whole 6-mers);
* :func:`sequence_problem`: why a string is not a DNA sequence (the sequence readers' rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.dna import encode_dna, encode_kmers
from hexamer.tokenizer.layout import DnaLayout
from hexamer.tokenizer.segment import CLOSE_TAG, OPEN_TAG
from hexamer.tokenizer.tags import check_prefix

__all__ = [
    "IUPAC",
    "DnaInputs",
    "Prompt",
    "TokenizedInputs",
    "dna_inputs",
    "full_prompt",
    "next_base_ids",
    "parse_prompt",
    "sequence_problem",
]

_ACGT = set("ACGT")
#: What a sequence may hold (either case): the IUPAC nucleotide codes, the rule of
#: :func:`hexamer.io.read_sequences`; anything but A/C/G/T sends its 6-mer to ``<oov>``.
IUPAC = "ACGTUNRYKMSWBDHV"
_INVALID_CHAR = re.compile(f"[^{IUPAC}{IUPAC.lower()}]")


def sequence_problem(content: str) -> str | None:
    """Why ``content`` is not a DNA sequence (a character that is not an IUPAC nucleotide code),
    in the words the sequence readers use, or ``None``."""
    bad = _INVALID_CHAR.search(content)
    if bad is None:
        return None
    return (
        f"invalid character {bad.group()!r} at position {bad.start() + 1} "
        f"(allowed: IUPAC nucleotide codes {IUPAC}, either case)"
    )


@dataclass
class Prompt:
    """A parsed generation prompt: ``ids`` end on a 6-mer boundary (``<dna>`` + whole 6-mers),
    ``forced`` is the partial last 6-mer generation must start with, ``n_oov_bases`` the prompt
    bases lost to ``<oov>`` 6-mers."""

    ids: list[int]
    forced: str
    n_oov_bases: int


class DnaInputs(NamedTuple):
    """``prefix + <dna>sequence`` as a scoring input. ``ids[start + t]`` is target 6-mer ``t``
    (``targets[t]``, an index in the 6-mer block) of which the first ``n_real[t]`` bases are real
    (0: an ``<oov>`` chunk); the logits at ``start - 1 + t`` predict it."""

    ids: list[int]
    start: int
    targets: np.ndarray
    n_real: np.ndarray
    content: str


def full_prompt(text: str, prefix: str) -> str:
    """``prefix<dna>text`` unless ``text`` already opens its own ``<dna>`` region (or no prefix);
    ``prefix`` must be metadata tags only (:func:`hexamer.tokenizer.tags.check_prefix`)."""
    check_prefix(prefix)
    if not isinstance(text, str) or OPEN_TAG in text or not prefix:
        return text
    return f"{prefix}{OPEN_TAG}{text}"


def parse_prompt(tokenizer: CarbonTokenizer, prompt: str, index: int) -> Prompt:
    """Token ids ending on a 6-mer boundary, plus the partial last 6-mer to force. ``index``
    names the prompt in errors."""
    layout = tokenizer.layout
    if not isinstance(prompt, str):
        raise TypeError(f"prompt {index} is a {type(prompt).__name__}, expected str")
    if not prompt.strip():
        raise ValueError(f"prompt {index} is empty; pass '<dna>' to generate without a DNA context")
    if OPEN_TAG in prompt:
        at = prompt.rfind(OPEN_TAG)
        prefix, content = prompt[:at], prompt[at + len(OPEN_TAG) :]
    else:
        prefix, content = "", prompt
    if CLOSE_TAG in content:
        raise ValueError(
            f"prompt {index} must end inside an open <dna> region (remove the final </dna>): "
            "generation continues the DNA"
        )
    content = content.strip()
    k = layout.k
    r = len(content) % k
    body, tail = content[: len(content) - r], content[len(content) - r :].upper()
    if not set(tail) <= _ACGT:
        raise ValueError(
            f"prompt {index} ends with a partial {k}-mer {tail!r} holding non-ACGT characters; "
            f"trim or fix the last {r} bases"
        )
    ids = tokenizer.encode(prefix) if prefix else []
    dna = encode_dna(body, layout)
    ids.append(layout.begin_id)
    ids.extend(dna.ids.tolist())
    return Prompt(ids=ids, forced=tail, n_oov_bases=dna.n_oov_bases)


def dna_inputs(
    tokenizer: CarbonTokenizer,
    sequence: str,
    prefix: str,
    index: int,
    *,
    max_prompt_tokens: int,
    context_length: int,
    validate: bool = True,
) -> DnaInputs:
    """Token ids and targets of ``prefix + <dna>sequence``. ``validate`` refuses characters that
    are not IUPAC nucleotide codes (the sequence readers' rule); VEP windows cut from a reference
    skip it and score whatever the FASTA holds as ``<oov>``. More than ``max_prompt_tokens`` ids
    is an error naming the model's ``context_length``."""
    layout = tokenizer.layout
    if not isinstance(sequence, str):
        raise TypeError(f"sequence {index} is a {type(sequence).__name__}, expected str")
    content = sequence.strip()
    if not content:
        raise ValueError(f"sequence {index} is empty")
    if validate and (problem := sequence_problem(content)) is not None:
        raise ValueError(f"sequence {index}: {problem}")
    check_prefix(prefix)
    dna = encode_dna(content, layout)
    ids = tokenizer.encode(prefix) if prefix else []
    start = len(ids) + 1
    ids = [*ids, layout.begin_id, *dna.ids.tolist()]
    if len(ids) > max_prompt_tokens:
        room = "" if max_prompt_tokens == context_length else " less the one completion token"
        raise ValueError(
            f"sequence {index} needs {len(ids)} tokens, more than the model's context of "
            f"{context_length}{room}"
        )
    return DnaInputs(ids, start, dna.ids - layout.kmer_start, dna.n_real.astype(np.int64), content)


class TokenizedInputs:
    """What every backend shares: :meth:`dna_inputs` from its ``tokenizer`` within its
    ``max_prompt_tokens`` (a base class of :class:`~hexamer.backend.local.LocalBackend` and
    :class:`~hexamer.remote.backend.RemoteBackend`)."""

    tokenizer: CarbonTokenizer
    context_length: int
    max_prompt_tokens: int

    def dna_inputs(
        self, sequence: str, prefix: str = "", index: int = 0, *, validate: bool = True
    ) -> DnaInputs:
        """``prefix + <dna>sequence`` as ids and targets (:func:`dna_inputs`)."""
        return dna_inputs(
            self.tokenizer,
            sequence,
            prefix,
            index,
            max_prompt_tokens=self.max_prompt_tokens,
            context_length=self.context_length,
            validate=validate,
        )


def next_base_ids(layout: DnaLayout, context: str) -> list[int]:
    """``<dna>context`` (whole 6-mers; an ``N`` makes its 6-mer ``<oov>``): the prompt whose next
    token's first base is the base right after ``context``."""
    return [layout.begin_id, *encode_kmers(context, layout).tolist()]
