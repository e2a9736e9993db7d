"""Segmentation rules of tokenizer_fns.md §2.1-2.2, including character spans."""

from __future__ import annotations

from hexamer.tokenizer import split_segments


def kinds(text: str) -> list[tuple[str, str]]:
    out = []
    for s in split_segments(text):
        if s.is_dna:
            out.append(("dna", text[s.content_start : s.content_end]))
        else:
            out.append(("text", text[s.start : s.end]))
    return out


def test_plain_text() -> None:
    assert kinds("hello world") == [("text", "hello world")]
    assert split_segments("") == []


def test_region_and_tags() -> None:
    segs = split_segments("a<dna> ACG </dna>b")
    assert kinds("a<dna> ACG </dna>b") == [("text", "a"), ("dna", "ACG"), ("text", "b")]
    dna = segs[1]
    assert dna.has_open and dna.has_close
    assert (dna.start, dna.end) == (1, 17)


def test_unterminated_region_runs_to_the_end() -> None:
    segs = split_segments("x<dna>ACGT</dn")
    assert kinds("x<dna>ACGT</dn") == [("text", "x"), ("dna", "ACGT</dn")]
    assert segs[1].has_open and not segs[1].has_close


def test_stray_close_tag_makes_prefix_dna() -> None:
    segs = split_segments("ACGT</dna>hi")
    assert kinds("ACGT</dna>hi") == [("dna", "ACGT"), ("text", "hi")]
    assert not segs[0].has_open and segs[0].has_close


def test_close_before_open() -> None:
    assert kinds("AC</dna>x<dna>GG</dna>") == [("dna", "AC"), ("text", "x"), ("dna", "GG")]


def test_bare_tags() -> None:
    (only_open,) = split_segments("<dna>")
    assert only_open.has_open and not only_open.has_close
    (only_close,) = split_segments("</dna>")
    assert only_close.has_close and not only_close.has_open
    (empty,) = split_segments("<dna></dna>")
    assert empty.has_open and empty.has_close and empty.content_start == empty.content_end


def test_tags_are_case_sensitive() -> None:
    assert kinds("<DNA>ACGT</DNA>") == [("text", "<DNA>ACGT</DNA>")]


def test_unicode_whitespace_is_stripped_at_the_ends_only() -> None:
    assert kinds("<dna>\u2003AC GT\u00a0</dna>") == [("dna", "AC GT")]
