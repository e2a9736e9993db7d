"""What ``hexamer view`` may show: each file given is classified by its name (and, for a tabix
TSV, its header), with the index igv.js needs found beside it, before any server starts.

A file igv.js cannot draw, a compressed file without its index, an index given instead of its
data file, a region whose contig a bigWig lacks and a VCF whose contigs the reference lacks are
refused with a :class:`ViewError` that names the file and, for a missing index, the command that
builds it. Contig names are compared the way igv.js aliases them (``chr20`` = ``20``, any case).
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "KINDS",
    "Locus",
    "ViewError",
    "ViewFile",
    "check_contigs",
    "classify",
    "contig_key",
    "expand_folders",
    "fasta_contigs",
    "parse_locus",
]

#: kind -> file-name endings (lower case) it is recognised by
KINDS: dict[str, tuple[str, ...]] = {
    "fasta": (".fa", ".fasta", ".fna", ".fa.gz", ".fasta.gz", ".fna.gz"),
    "bigwig": (".bw", ".bigwig"),
    "bedgraph": (".bedgraph", ".bedgraph.gz"),
    "vcf": (".vcf", ".vcf.gz", ".vcf.bgz"),
    "bed": (".bed", ".bed.gz"),
    "ism": (".tsv.bgz", ".tsv.gz"),
}
_INDEXES = (".fai", ".gzi", ".tbi", ".csi")
_GZIP_MAGIC = b"\x1f\x8b"


class ViewError(ValueError):
    """A file ``hexamer view`` or ``hexamer report`` cannot show; the message names the file."""


@dataclass(frozen=True)
class ViewFile:
    """One data file to show: its ``kind`` (a :data:`KINDS` key), its index (``.fai``, ``.tbi``
    or ``.csi``) and, for a bgzip FASTA, the ``.gzi`` block index."""

    path: Path
    kind: str
    index: Path | None = None
    gzi: Path | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        """The track name: the file name without its kind's ending."""
        lower = self.name.lower()
        for end in sorted(KINDS[self.kind], key=len, reverse=True):
            if lower.endswith(end):
                return self.name[: -len(end)] or self.name
        return self.name


@dataclass(frozen=True)
class Locus:
    """``contig:start-end`` as 1-based inclusive coordinates (what igv.js and users write)."""

    contig: str
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.contig}:{self.start}-{self.end}"


def parse_locus(text: str) -> Locus:
    """``chr:start-end`` (commas allowed) -> :class:`Locus`; ``ViewError`` on anything else."""
    contig, sep, span = text.strip().rpartition(":")
    a, dash, b = span.replace(",", "").partition("-")
    if not (sep and contig and dash and a.isdigit() and b.isdigit()):
        raise ViewError(f"--region must be contig:start-end (1-based), got {text!r}")
    start, end = int(a), int(b)
    if not 1 <= start <= end:
        raise ViewError(f"--region {text!r}: need 1 <= start <= end")
    return Locus(contig, start, end)


def contig_key(name: str) -> str:
    """The name igv.js matches on: case-folded, without a leading ``chr``."""
    key = name.lower()
    return key[3:] if key.startswith("chr") and len(key) > 3 else key


def _kind_of(path: Path) -> str | None:
    lower = path.name.lower()
    for kind, ends in sorted(KINDS.items(), key=lambda kv: -max(len(e) for e in kv[1])):
        if any(lower.endswith(end) for end in ends):
            return kind
    return None


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == _GZIP_MAGIC


def _first_line(path: Path) -> str:
    opener = gzip.open if _is_gzip(path) else open
    try:
        with opener(path, "rt", errors="replace") as f:
            for line in f:
                if not line.startswith("##"):
                    return line
    except (OSError, EOFError) as exc:
        raise ViewError(f"{path}: cannot be read ({exc})") from exc
    return ""


def _beside(path: Path, *suffixes: str) -> Path | None:
    for suffix in suffixes:
        candidate = path.with_name(path.name + suffix)
        if candidate.is_file():
            return candidate
    return None


def _needs_index(path: Path, what: str, command: str) -> ViewError:
    return ViewError(f"{path}: {what} has no index beside it; build it with `{command}`")


def classify(path: str | os.PathLike[str], *, tabix: bool = True) -> ViewFile:
    """The :class:`ViewFile` of ``path``, or ``ViewError`` naming the file and what is wrong;
    ``tabix=False``: a compressed VCF or ISM table is read whole, so needs no index (a report)."""
    p = Path(path)
    if not p.exists():
        raise ViewError(f"{p}: no such file")
    if not p.is_file():
        raise ViewError(f"{p}: not a file")
    lower = p.name.lower()
    if lower.endswith(_INDEXES):
        raise ViewError(f"{p}: an index; give its data file (the index beside it is found)")
    kind = _kind_of(p)
    if kind is None:
        if lower.endswith(".bcf"):
            raise ViewError(
                f"{p}: igv.js cannot read BCF; convert it: `bcftools view -Oz -W=tbi -o OUT.vcf.gz {p}`"
            )
        ends = ", ".join(e for ends in KINDS.values() for e in ends)
        raise ViewError(f"{p}: igv.js cannot show this file type (hexamer view shows {ends})")
    gz = _is_gzip(p)
    if kind == "fasta":
        index = _beside(p, ".fai")
        if index is None:
            raise _needs_index(p, "the FASTA", f"samtools faidx {p}")
        gzi = _beside(p, ".gzi") if gz else None
        if gz and gzi is None:
            raise ViewError(
                f"{p}: a compressed FASTA must be bgzip'ed with its .gzi index: "
                f"`gunzip -c {p} | bgzip -c > OUT.fa.gz && samtools faidx OUT.fa.gz`"
            )
        return ViewFile(p, kind, index, gzi)
    if kind == "ism" and not _first_line(p).startswith("#Chrom\tPos\tRef\tAlt"):
        raise ViewError(f"{p}: not a CADD-layout table (#Chrom Pos Ref Alt RawScore PHRED) from hexamer ism")
    index = _beside(p, ".tbi", ".csi") if gz else None
    if tabix and gz and index is None and kind in ("vcf", "ism"):
        preset = "-p vcf" if kind == "vcf" else "-s 1 -b 2 -e 2"
        raise _needs_index(p, f"the compressed {kind.upper()}", f"tabix {preset} {p}")
    return ViewFile(p, kind, index)


def expand_folders(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """``paths`` with each folder (a ``hexamer track`` or ``ism`` run) replaced by the files in it
    that igv.js can show (not its sub-folders, not indexes); a folder with none is a ``ViewError``."""
    out: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            out.append(path)
            continue
        found = sorted(p for p in path.iterdir() if p.is_file() and _kind_of(p) is not None)
        if not found:
            raise ViewError(f"{path}: a folder with no file igv.js can show")
        out += found
    return out


def fasta_contigs(fasta: ViewFile) -> dict[str, int]:
    """Contig -> length from the FASTA's ``.fai``."""
    assert fasta.index is not None
    out: dict[str, int] = {}
    for line in fasta.index.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2 and fields[1].isdigit():
            out[fields[0]] = int(fields[1])
    if not out:
        raise ViewError(f"{fasta.index}: an empty or malformed FASTA index")
    return out


def _vcf_contigs(vf: ViewFile) -> set[str]:
    """Contigs the records of a VCF use (header declarations are not enough: records may differ)."""
    from hexamer.io.vcf.reader import iter_data_lines

    found: set[str] = set()
    try:
        for raw in iter_data_lines(vf.path):
            chrom = raw.split(b"\t", 1)[0].strip()
            if chrom and not chrom.startswith(b"#"):
                found.add(chrom.decode("utf-8", "replace"))
    except (OSError, EOFError) as exc:
        raise ViewError(f"{vf.path}: cannot be read ({exc})") from exc
    return found


def _bigwig_contigs(vf: ViewFile) -> set[str]:
    from hexamer.tracks.writers import import_pybigwig

    try:
        bw = import_pybigwig().open(str(vf.path))
    except RuntimeError as exc:
        raise ViewError(f"{vf.path}: not a readable bigWig ({exc})") from exc
    if bw is None or not bw.isBigWig():
        raise ViewError(f"{vf.path}: not a bigWig file")
    try:
        return set(bw.chroms())
    finally:
        bw.close()


def _missing(names: Iterable[str], known: Iterable[str]) -> list[str]:
    keys = {contig_key(n) for n in known}
    return sorted(n for n in names if contig_key(n) not in keys)


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_contigs(files: Sequence[ViewFile], reference: Mapping[str, int], region: Locus | None) -> None:
    """Refuse what igv.js would silently draw empty: a VCF with contigs the reference lacks, a
    region outside the reference, a bigWig without the region's contig."""
    if region is not None:
        by_key = {contig_key(n): n for n in reference}
        name = by_key.get(contig_key(region.contig))
        if name is None:
            raise ViewError(
                f"--region {region}: contig {region.contig} is not in the reference ({_listed(list(reference))})"
            )
        if region.end > reference[name]:
            raise ViewError(f"--region {region}: past the end of {name} ({reference[name]:,} bp)")
    for vf in files:
        if vf.kind == "vcf":
            missing = _missing(_vcf_contigs(vf), reference)
            if missing:
                raise ViewError(f"{vf.path}: contigs not in the reference: {_listed(missing)}")
        elif vf.kind == "bigwig":
            chroms = _bigwig_contigs(vf)
            if region is not None and _missing([region.contig], chroms):
                raise ViewError(
                    f"{vf.path}: has no values on {region.contig} (it covers {_listed(sorted(chroms))})"
                )
