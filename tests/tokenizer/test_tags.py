"""Metadata tags and prefixes: names of a documented character set, prefixes of tags only, so no
DNA or control token reaches the model through them."""

from __future__ import annotations

import pytest

from hexamer.tokenizer.tags import check_prefix, check_tag_name, tag_prefix


@pytest.mark.parametrize(
    "prefix", ["", "<mammalian_species>", " <mammalian_species>\n<gene_type> ", "<a.b-c_1><X>"]
)
def test_metadata_tags_are_prefixes(prefix: str) -> None:
    assert check_prefix(prefix) == prefix


@pytest.mark.parametrize(
    ("prefix", "where"),
    [
        ("</dna><|endoftext|>", "character 1: not a <name> tag"),
        ("<dna>", "character 1: <dna> is a DNA or control token"),
        ("<mammalian_species><dna>GG</dna>", "character 20: <dna> is"),
        ("<x><oov>", "character 4: <oov> is"),
        ("<unused_3>", "<unused_3> is"),
        ("<think>", "<think> is"),
        ("<|endoftext|>", "not a <name> tag"),
        ("mammalian", "character 1: not a <name> tag"),
        ("<a>text", "character 4: not a <name> tag"),
        ("<a b>", "not a <name> tag"),
        ("<>", "not a <name> tag"),
        ("<" + "x" * 65 + ">", "a name of 65 characters (at most 64)"),
    ],
)
def test_anything_else_is_refused_naming_the_field_and_position(prefix: str, where: str) -> None:
    with pytest.raises(ValueError, match=r"^prefix: ") as info:
        check_prefix(prefix)
    assert where in str(info.value)


def test_prefix_must_be_text() -> None:
    with pytest.raises(TypeError, match="prefix must be a str"):
        check_prefix(3)


def test_tags_are_names_and_hexamer_writes_the_brackets() -> None:
    assert (
        tag_prefix(["mammalian_species", "<gene_type>", " exon "]) == "<mammalian_species><gene_type><exon>"
    )
    assert tag_prefix(None, "<x>") == "<x>"
    assert check_tag_name("a.b-c_9") == "a.b-c_9"
    for bad in ["x><dna>GG</dna", "", "dna", "<dna>", "a b", "|endoftext|", "x" * 65]:
        with pytest.raises(ValueError, match=r"^tags: tag "):
            tag_prefix([bad])
    with pytest.raises(ValueError, match="a list of tag names"):
        tag_prefix("mammalian_species")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefix: "):
        tag_prefix(["ok"], "<dna>")
