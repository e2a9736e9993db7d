"""Bad design input fails on construction, with a message naming the field."""

from __future__ import annotations

import pytest

from hexamer.design import DesignConstraints, DesignError, DesignOptions, known_enzymes, site_of


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (dict(length=0), "length"),
        (dict(length=10, avoid_sites=("FooI",)), "known enzymes: AarI"),
        (dict(length=10, mask="ACGX"), "mask: position 4"),
        (dict(length=10, avoid=("GGZ",)), "not an IUPAC"),
        (dict(length=10, gc=(0.6, 0.4)), "gc must be MIN:MAX"),
        (dict(length=10, gc=(-0.1, 0.4)), "gc must be MIN:MAX"),
        (dict(length=10, gc=(0.2, 1.5)), "gc must be MIN:MAX"),
        (dict(length=10, gc=(0.2, 0.5), gc_window=11), "larger than the length"),
        (dict(length=10, gc_window=5), "needs a gc range"),
        (dict(length=10, translate_to="MKB"), "not amino acids"),
        (dict(length=10, translate_to="M*K"), "not amino acids"),
        (dict(length=10, translate_to="MKVL"), "do not fit"),
        (dict(length=10, prefix="ACGTACGTACG"), "prefix has 11 bases"),
        (dict(length=10, prefix="ACGTAC", suffix="ACGTA"), "overlap"),
        (dict(length=10, motifs=((8, "ACG"),)), "does not fit"),
        (dict(length=10, max_homopolymer=0), "max_homopolymer"),
        (dict(length=10, mask="A" * 11), "mask covers 11"),
    ],
)
def test_bad_constraints_are_named(kwargs: dict, words: str) -> None:
    with pytest.raises(DesignError, match=words.replace("*", r"\*")):
        DesignConstraints(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [dict(n=0), dict(method="evolve"), dict(temperature=0), dict(top_p=0), dict(width=2, n=3, method="beam")],
)
def test_bad_options(kwargs: dict) -> None:
    with pytest.raises(DesignError):
        DesignOptions(**kwargs)


def test_enzyme_table() -> None:
    need = {"BsaI", "BsmBI", "BbsI", "SapI", "EcoRI", "BamHI", "XhoI", "NotI"}
    assert need <= set(known_enzymes())
    assert site_of("bsai") == "GGTCTC" and site_of("NotI") == "GCGGCCGC"


def test_enzyme_sites_agree_with_biopython() -> None:
    """Every shipped site equals Biopython's REBASE entry (an independent copy)."""
    restriction = pytest.importorskip("Bio.Restriction")
    for name in known_enzymes():
        enzyme = getattr(restriction, name, None)
        if enzyme is not None:
            assert str(enzyme.site) == site_of(name), name
