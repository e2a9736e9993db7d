"""Matching the contig names of a VCF to those of a reference FASTA.

The same chromosome is spelled differently by different sources: ``chr1`` (UCSC) and ``1``
(Ensembl), ``chrM`` and ``MT``, ``NC_007795`` in a VCF and ``gi|88193823|ref|NC_007795.1|`` as a
FASTA header from NCBI. A job that silently skips every record for that reason is worse than one
that fails, so :class:`ContigResolver` maps a VCF name to a FASTA contig in this order:

1. ``renames`` (``--rename-chrs``: an explicit ``old new`` table, the bcftools convention);
2. the exact name;
3. an alias, used only when exactly one FASTA contig matches: the ``chr`` prefix added or removed,
   ``chrM``/``M``/``MT``/``chrMT`` for the mitochondrion, an accession inside an NCBI ``|``-separated
   header, and a versionless accession for a versioned one (``NC_007795`` for ``NC_007795.1``,
   either way round; two different versions never match). Several matches are ambiguous and
   resolve to nothing, with a reason that lists them.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["ContigResolution", "ContigResolver", "RenameFileError", "read_rename_file"]

PathLike = str | os.PathLike[str]

#: NCBI FASTA header database tags (``gi|123|ref|NC_1.1|``): the field after one is an identifier.
_NCBI_TAGS = frozenset(
    {"gi", "ref", "gb", "emb", "dbj", "lcl", "tpg", "tpe", "tpd", "gnl", "pir", "prf", "sp", "tr"}
)
_VERSIONED = re.compile(r"^(?P<stem>[A-Za-z][A-Za-z0-9_]*?[0-9]+)\.(?P<version>[0-9]+)$")
_MITO = frozenset({"M", "MT"})
_SHOWN = 8  # contig names listed in a message before "..."


class RenameFileError(ValueError):
    """A ``--rename-chrs`` file cannot be read or is not two columns per line."""


@dataclass(frozen=True, slots=True)
class ContigResolution:
    """Where a VCF contig name points: ``contig`` (None when nowhere) and ``how``.

    ``how`` is ``exact``, ``renamed`` (by the rename table), ``alias`` (a differently spelled
    unique match), ``ambiguous`` (several matches) or ``missing``; ``message`` says it in words
    (None for an exact match).
    """

    name: str
    contig: str | None
    how: str
    message: str | None = None


def read_rename_file(path: PathLike) -> dict[str, str]:
    """The ``old new`` pairs of a bcftools ``--rename-chrs`` file (whitespace-separated columns,
    ``#`` comment and blank lines ignored). A line without exactly two columns or an old name
    given twice with different new names raises :class:`RenameFileError` naming the line."""
    display = os.fspath(path)
    try:
        with open(display, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise RenameFileError(f"{display}: no such file") from None
    except IsADirectoryError:
        raise RenameFileError(f"{display}: is a directory, not a rename file") from None
    except UnicodeDecodeError:
        raise RenameFileError(f"{display}: not UTF-8 text") from None
    except OSError as exc:
        raise RenameFileError(f"{display}: cannot read ({exc.strerror or exc})") from None
    renames: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 2:
            raise RenameFileError(
                f"{display}: line {lineno}: expected two whitespace-separated columns (old new), "
                f"found {len(fields)}: {line.strip()[:80]!r}"
            )
        old, new = fields
        if old in renames and renames[old] != new:
            raise RenameFileError(
                f"{display}: line {lineno}: {old!r} is renamed to {renames[old]!r} on line "
                f"{first_line[old]} and to {new!r} here"
            )
        renames[old] = new
        first_line.setdefault(old, lineno)
    return renames


def _identifiers(name: str) -> list[str]:
    """The name and, for an NCBI ``a|b|c|d|`` header, each identifier field in it."""
    out = [name]
    if "|" in name:
        parts = name.split("|")
        out += [
            value
            for tag, value in itertools.pairwise(parts)
            if tag in _NCBI_TAGS and value and not value.isdigit()
        ]
    return out


def _keys(name: str) -> set[tuple[str, str | None]]:
    """``(stem, version)`` spellings of a name; equal stems with compatible versions match."""
    keys: set[tuple[str, str | None]] = set()
    for ident in _identifiers(name):
        m = _VERSIONED.match(ident)
        stem, version = (m.group("stem"), m.group("version")) if m else (ident, None)
        bare = stem[3:] if stem[:3].lower() == "chr" and len(stem) > 3 else stem
        if bare.upper() in _MITO:
            bare = "MT"
        keys.add((bare, version))
    return keys


def _listed(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > _SHOWN else "")


class ContigResolver:
    """Resolves VCF contig names against the contigs of one FASTA (see the module docstring)."""

    def __init__(self, fasta_contigs: Iterable[str], renames: Mapping[str, str] | None = None) -> None:
        self.contigs: list[str] = list(dict.fromkeys(fasta_contigs))
        self._present = set(self.contigs)
        self.renames: dict[str, str] = dict(renames or {})
        self._by_stem: dict[str, list[tuple[str, str | None]]] = {}
        for contig in self.contigs:
            for stem, version in _keys(contig):
                self._by_stem.setdefault(stem, []).append((contig, version))
        self._cache: dict[str, ContigResolution] = {}

    def resolve(self, name: str) -> ContigResolution:
        """Where the VCF contig ``name`` points (cached per name)."""
        hit = self._cache.get(name)
        if hit is None:
            hit = self._cache[name] = self._resolve(name)
        return hit

    def _resolve(self, name: str) -> ContigResolution:
        target = self.renames.get(name)
        if target is not None:
            if target in self._present:
                return ContigResolution(name, target, "renamed", f"VCF contig {name!r} renamed to {target!r}")
            return ContigResolution(
                name,
                None,
                "missing",
                f"contig {name!r} is renamed to {target!r}, which is not in the FASTA "
                f"(its contigs: {_listed(self.contigs)})",
            )
        if name in self._present:
            return ContigResolution(name, name, "exact")
        hits = self.aliases(name)
        if len(hits) == 1:
            return ContigResolution(
                name,
                hits[0],
                "alias",
                f"VCF contig {name!r} is not in the FASTA; using its contig {hits[0]!r}",
            )
        if hits:
            return ContigResolution(
                name,
                None,
                "ambiguous",
                f"contig {name!r} is not in the FASTA and could be any of {_listed(hits)}; "
                "not guessed: name the one to use with --rename-chrs",
            )
        return ContigResolution(
            name,
            None,
            "missing",
            f"contig {name!r} is not in the FASTA (its contigs: {_listed(self.contigs)})",
        )

    def aliases(self, name: str) -> list[str]:
        """FASTA contigs, other than ``name`` itself, that are spellings of ``name``."""
        found: dict[str, None] = {}
        for stem, version in _keys(name):
            for contig, other in self._by_stem.get(stem, ()):
                if contig != name and (version is None or other is None or version == other):
                    found[contig] = None
        return list(found)
