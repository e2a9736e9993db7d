"""Incremental decoding of generated ids with the hybrid tokenizer, for streaming.

``CarbonTokenizer.decode`` turns 6-mers into bases anywhere, writes DNA tags, drops BPE ids inside
an open ``<dna>`` region and joins byte-level BPE runs into UTF-8. :class:`IncrementalDetokenizer`
follows the same rules one id at a time, holding back a BPE run only while its bytes end inside a
UTF-8 character, so the concatenated deltas equal ``decode(ids)`` of the whole output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache

from hexamer.tokenizer import CarbonTokenizer
from hexamer.tokenizer.segment import CLOSE_TAG, OPEN_TAG

_MAX_HELD = 8  # a run that still ends mid-character after this many ids is invalid UTF-8: emit it


class IncrementalDetokenizer:
    """Text deltas of a growing id list. ``in_region``: the prompt left a ``<dna>`` region open."""

    def __init__(
        self, tokenizer: CarbonTokenizer, *, skip_special_tokens: bool = True, in_region: bool = False
    ):
        self.tok = tokenizer
        self.layout = tokenizer.layout
        self.skip = skip_special_tokens
        self.in_region = in_region
        self.special = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
        self._run: list[int] = []

    @classmethod
    def after_prompt(
        cls, tokenizer: CarbonTokenizer, prompt_ids: list[int], *, skip_special_tokens: bool = True
    ) -> IncrementalDetokenizer:
        """The detokenizer of what follows ``prompt_ids`` (inside a ``<dna>`` region if it left one open)."""
        return cls(
            tokenizer,
            skip_special_tokens=skip_special_tokens,
            in_region=prompt_in_region(tokenizer, prompt_ids),
        )

    def push(self, ids: Iterable[int]) -> str:
        parts: list[str] = []
        layout = self.layout
        for t in ids:
            t = int(t)
            if self.skip and t in self.special:
                continue
            if layout.is_kmer(t):
                parts.append(self._flush_run(force=True))
                parts.append(layout.kmers[t - layout.kmer_start])
            elif self.in_region:
                if t == layout.end_id:
                    self.in_region = False
                    if not self.skip:
                        parts.append(CLOSE_TAG)
                elif layout.is_dna(t):
                    parts.append(layout.dna_token_string(t))
                # BPE ids inside a region are dropped, as by decode()
            elif t == layout.begin_id:
                parts.append(self._flush_run(force=True))
                self.in_region = True
                if not self.skip:
                    parts.append(OPEN_TAG)
            elif layout.is_dna(t):
                parts.append(self._flush_run(force=True))
                if not (self.skip and t in (layout.end_id, layout.oov_id)):
                    parts.append(layout.dna_token_string(t))
            else:
                self._run.append(t)
                parts.append(self._flush_run(force=False))
        return "".join(parts)

    def flush(self) -> str:
        """Whatever is held back (call once the output is complete)."""
        return self._flush_run(force=True)

    def _flush_run(self, force: bool) -> str:
        if not self._run:
            return ""
        text = self.tok.decode(self._run, skip_special_tokens=self.skip)
        if not force and text.endswith("\ufffd") and len(self._run) < _MAX_HELD:
            return ""
        self._run = []
        return text


def prompt_in_region(tokenizer: CarbonTokenizer, prompt_ids: list[int]) -> bool:
    """Whether the prompt ends inside an open ``<dna>`` region (decode drops BPE ids there)."""
    layout = tokenizer.layout
    for t in reversed(prompt_ids):
        if t == layout.begin_id:
            return True
        if t == layout.end_id:
            return False
    return False


class TokenStrings:
    """Decoded string of single ids (``decode([id])``), cached; with a JSON-escaped form for the
    large prompt-logprob responses."""

    def __init__(self, tokenizer: CarbonTokenizer) -> None:
        self.tok = tokenizer
        self.layout = tokenizer.layout
        self.text = lru_cache(maxsize=1 << 18)(self._text)
        self.json = lru_cache(maxsize=1 << 18)(self._json)

    def _text(self, token_id: int) -> str:
        layout = self.layout
        if layout.is_kmer(token_id):
            return layout.kmers[token_id - layout.kmer_start]
        return self.tok.decode([token_id])

    def _json(self, token_id: int) -> str:
        return json.dumps(self.text(token_id))
