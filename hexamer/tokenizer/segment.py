"""Split text into BPE text and ``<dna>`` regions exactly as the official Carbon tokenizer does.

The rules (``shared/spec/tokenizer_fns.md`` §2.1-2.2): exact, case-sensitive tag search; a region
runs from ``<dna>`` to the next ``</dna>``; an unterminated ``<dna>`` makes the rest of the text DNA;
a ``</dna>`` before any ``<dna>`` makes everything before it DNA (a region with no opening tag).
Text segments keep their whitespace; DNA content is ``str.strip()``-ped at its ends only.
Every segment keeps its character span so tokens can be mapped back to the input.
"""

from __future__ import annotations

from dataclasses import dataclass

OPEN_TAG = "<dna>"
CLOSE_TAG = "</dna>"


@dataclass(frozen=True)
class Segment:
    """A piece of the input: plain text, or a DNA region with its optional tags."""

    is_dna: bool
    start: int  # character span of the whole segment in the input
    end: int
    has_open: bool = False
    has_close: bool = False
    content_start: int = 0  # character span of the stripped DNA content
    content_end: int = 0


def _dna_segment(text: str, start: int, end: int) -> Segment:
    piece = text[start:end]
    has_open = piece.startswith(OPEN_TAG)
    inner_start = start + (len(OPEN_TAG) if has_open else 0)
    inner_end = end
    has_close = piece.endswith(CLOSE_TAG) and (end - len(CLOSE_TAG)) >= inner_start
    if has_close:
        inner_end = end - len(CLOSE_TAG)
    inner = text[inner_start:inner_end]
    stripped_left = inner.lstrip()
    content_start = inner_start + (len(inner) - len(stripped_left))
    content_end = content_start + len(stripped_left.rstrip())
    return Segment(True, start, end, has_open, has_close, content_start, content_end)


def split_segments(text: str) -> list[Segment]:
    """Text and DNA segments in input order (empty text segments are dropped)."""
    segments: list[Segment] = []
    i, n = 0, len(text)
    while i < n:
        s = text.find(OPEN_TAG, i)
        e = text.find(CLOSE_TAG, i)
        if s < 0 and e < 0:
            segments.append(Segment(False, i, n))
            break
        if s < 0 or (0 <= e < s):
            # a closing tag with no opening tag before it: everything up to it is DNA
            stop = e + len(CLOSE_TAG)
            segments.append(_dna_segment(text, i, stop))
            i = stop
            continue
        if s > i:
            segments.append(Segment(False, i, s))
        if e < 0:
            segments.append(_dna_segment(text, s, n))
            break
        stop = e + len(CLOSE_TAG)
        segments.append(_dna_segment(text, s, stop))
        i = stop
    return segments
