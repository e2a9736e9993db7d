"""A reference FASTA for random access: any FASTA a user has (plain, bgzipped, plain gzip, indexed
or not), and the contig names it answers to (``chr1``/``1``, renames, accessions).

The one FASTA reader of the project: variant scoring and the ClinVar evaluation both use it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from hexamer.io.contigs import ContigResolver, read_rename_file
from hexamer.io.fasta import FastaError, PreparedFasta, prepare_fasta

__all__ = ["Reference"]

PathLike = str | os.PathLike[str]


class Reference:
    """A reference FASTA opened with ``pysam.FastaFile``, and the contig names it answers to.

    Any FASTA a user has is accepted (plain, bgzipped or plain gzip, with or without an index,
    ragged line lengths): :func:`hexamer.io.fasta.prepare_fasta` says how and at what cost, and
    :attr:`note` tells when a copy was made. VCF contig names are matched to the FASTA's by a
    :class:`~hexamer.io.contigs.ContigResolver`; ``renames`` is a bcftools ``--rename-chrs`` table
    (a file or a mapping). Sequences come back upper-cased (soft-masking is not sequence). Use as
    a context manager, or call :meth:`close`.
    """

    def __init__(self, path: PathLike, *, renames: PathLike | Mapping[str, str] | None = None) -> None:
        import pysam

        self.path = os.fspath(path)
        table = read_rename_file(renames) if isinstance(renames, str | os.PathLike) else renames
        self._prepared: PreparedFasta | None = prepare_fasta(self.path)
        prepared = self._prepared
        self.note: str | None = prepared.note
        old = pysam.set_verbosity(0)
        try:
            self._fasta = pysam.FastaFile(
                prepared.path, filepath_index=prepared.fai, filepath_index_compressed=prepared.gzi
            )
        except (OSError, ValueError) as exc:
            self.close()
            raise FastaError(f"{self.path}: not a readable FASTA file ({exc})") from exc
        finally:
            pysam.set_verbosity(old)
        self.lengths: dict[str, int] = dict(zip(self._fasta.references, self._fasta.lengths, strict=True))
        self.order: dict[str, int] = {name: i for i, name in enumerate(self._fasta.references)}
        self.resolver = ContigResolver(self.lengths, table)

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        fasta = getattr(self, "_fasta", None)
        if fasta is not None:
            fasta.close()
            self._fasta = None
        self._prepared = None  # a temporary copy is removed once nothing holds it

    def resolve(self, name: str) -> tuple[str | None, str | None]:
        """``(FASTA contig, message)`` for a VCF contig name (see :class:`ContigResolver`).

        An exact match gives ``(name, None)``; a rename or a unique alias gives ``(contig, note)``
        where the note says which contig was used; no match or an ambiguous one gives
        ``(None, reason)``.
        """
        hit = self.resolver.resolve(name)
        return hit.contig, hit.message

    def fetch(self, contig: str, start: int, end: int) -> str:
        """Upper-cased bases ``[start, end)`` of a FASTA contig, clipped to the contig."""
        length = self.lengths[contig]
        start, end = max(0, start), min(length, end)
        if end <= start:
            return ""
        return self._fasta.fetch(contig, start, end).upper()


# --------------------------------------------------------------------------- contigs, before a job
