"""Named restriction sites: the shipped table ``hexamer/data/design/restriction_sites.tsv``
(recognition sequences from REBASE, http://rebase.neb.com), read once."""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["known_enzymes", "site_of"]


@cache
def _table() -> dict[str, str]:
    text = resources.files("hexamer").joinpath("data/design/restriction_sites.tsv").read_text("utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    return {name: site for name, site, _kind in rows[1:]}


def known_enzymes() -> list[str]:
    """Every enzyme name the table knows, sorted case-insensitively."""
    return sorted(_table(), key=str.lower)


def site_of(enzyme: str) -> str:
    """The recognition site of ``enzyme`` (case-insensitive); ``ValueError`` naming the known ones."""
    by_lower = {name.lower(): site for name, site in _table().items()}
    site = by_lower.get(enzyme.strip().lower())
    if site is None:
        raise ValueError(f"unknown enzyme {enzyme!r}; known enzymes: {', '.join(known_enzymes())}")
    return site
