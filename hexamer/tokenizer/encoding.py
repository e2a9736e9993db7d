"""Results of encoding: ids plus the maps back to characters and bases.

Base-level work (FNS scoring, variant effects, masks) needs to know which bases each DNA token
covers and how many ``A`` pads the last one carries; :class:`DnaSpan` answers that for one
``<dna>`` region, :class:`Encoding` for a whole input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

# token_mask values, as in the official tokenizer (tokenizer_fns.md §2.5)
MASK_TEXT = -1
MASK_STRUCTURAL = 0  # <dna>, </dna>, <oov>
MASK_PADDING = -2


@dataclass(frozen=True)
class DnaSpan:
    """The k-mer tokens of one DNA region and the bases they cover.

    ``token_start:token_stop`` index the region's k-mer/``<oov>`` tokens in the encoding (tags
    excluded); ``char_start:char_end`` is the stripped content in the input text; bases are numbered
    from 0 at ``char_start``. The last token carries ``pad_bases`` padding ``A``s.
    """

    token_start: int
    token_stop: int
    char_start: int
    char_end: int
    n_bases: int
    k: int = 6

    @property
    def n_tokens(self) -> int:
        return self.token_stop - self.token_start

    @property
    def pad_bases(self) -> int:
        return self.n_tokens * self.k - self.n_bases

    def base_to_token(self, base: int) -> tuple[int, int]:
        """(token index in the encoding, position 0..k-1 inside that token) of base ``base``."""
        if not 0 <= base < self.n_bases:
            raise IndexError(f"base {base} is outside this region's {self.n_bases} bases")
        t, j = divmod(base, self.k)
        return self.token_start + t, j

    def token_to_bases(self, token: int) -> tuple[int, int]:
        """Half-open range of real bases (region coordinates) that token ``token`` covers."""
        if not self.token_start <= token < self.token_stop:
            raise IndexError(f"token {token} is not a k-mer token of this region")
        start = (token - self.token_start) * self.k
        return start, min(start + self.k, self.n_bases)


class Encoding:
    """One encoded input: ids, the official ``token_mask``, character offsets and DNA spans.

    Ids and masks are kept as numpy arrays (a chromosome is millions of tokens); the list views and
    the character offsets are built only when asked for.
    """

    def __init__(
        self,
        input_ids: np.ndarray,
        mask: np.ndarray,
        dna_spans: list[DnaSpan],
        offsets_fn: Callable[[], list[tuple[int, int]]],
    ) -> None:
        self.input_ids = input_ids
        self.mask = mask
        self.dna_spans = dna_spans
        self._offsets_fn = offsets_fn

    def __len__(self) -> int:
        return len(self.input_ids)

    def __repr__(self) -> str:
        return f"Encoding(ids={self.ids!r}, token_mask={self.token_mask!r}, dna_spans={self.dna_spans!r})"

    @cached_property
    def ids(self) -> list[int]:
        return self.input_ids.tolist()

    @cached_property
    def token_mask(self) -> list[int]:
        """-1 text, 0 tags and ``<oov>``, 6 full k-mer, r = real bases of a padded tail (§2.5)."""
        return self.mask.tolist()

    @cached_property
    def offsets(self) -> list[tuple[int, int]]:
        """(start, end) character span of every token in the input text."""
        return self._offsets_fn()

    @property
    def n_oov(self) -> int:
        """k-mer positions that became ``<oov>`` because they held a non-ACGT character."""
        return sum(
            int(np.count_nonzero(self.mask[span.token_start : span.token_stop] == MASK_STRUCTURAL))
            for span in self.dna_spans
        )


class BatchEncoding(dict):
    """A dict of batch fields (``input_ids``, ``attention_mask``, ...) with attribute access and
    ``.to(device)``, shaped like ``transformers.BatchEncoding`` so model code can take either."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc

    def to(self, device: Any) -> BatchEncoding:
        return BatchEncoding({k: (v.to(device) if hasattr(v, "to") else v) for k, v in self.items()})


def stack_padded(
    rows: Sequence[Sequence[int] | np.ndarray], pad_value: int, length: int, left: bool
) -> np.ndarray:
    """(len(rows), length) int64 array, each row padded on the chosen side."""
    out = np.full((len(rows), length), pad_value, dtype=np.int64)
    for i, row in enumerate(rows):
        n = len(row)
        if n:
            if left:
                out[i, length - n :] = row
            else:
                out[i, :n] = row
    return out
