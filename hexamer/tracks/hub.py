"""UCSC track hub files (``hub.txt``, ``genomes.txt``, ``trackDb.txt``) for the bigWigs of a run.

The four ``prob_A`` … ``prob_T`` tracks go into a ``multiWig`` container with ``aggregate
stacked``: at each base the bars sum to 1, a sequence-logo-like view (A green, C blue, G orange,
T red). The four ``logprob_*`` tracks go into a second container drawn as ``transparentOverlay``
(stacking log-probabilities would add them, which means nothing). ``logprob_ref``, ``entropy``
and ``llr`` are single bigWig tracks. Every ``bigDataUrl`` is relative to ``trackDb.txt``, which
sits beside the bigWigs, so the folder can be served as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from hexamer.io.writers import atomic_path

__all__ = ["COLOURS", "contig_name_problem", "hub_texts", "write_hub"]

COLOURS = {"A": "0,150,0", "C": "0,0,230", "G": "255,165,0", "T": "220,0,0"}
_LABELS = {
    "logprob_ref": ("log P(ref)", "log P(reference base | context), nats"),
    "entropy": ("entropy (bits)", "Entropy of the per-base distribution, bits (0 certain, 2 uniform)"),
    "llr": ("mean alt LLR", "Mean over the 3 alts of log P(alt) - log P(ref), nats (< 0: ref preferred)"),
}
_GENOME = re.compile(r"^[A-Za-z0-9_.-]+$")
#: UCSC assemblies whose sequences are all named chr*
_CHR_NAMED = re.compile(r"^(hg|mm|rn|danRer|galGal|susScr|bosTau|canFam|panTro|rheMac)\d+$")


#: UCSC's limits on label lengths
_LIMITS = {"shortLabel": 17, "longLabel": 80}


def _stanza(lines: Iterable[tuple[str, str]], indent: str = "") -> str:
    return "".join(f"{indent}{key} {value[: _LIMITS.get(key)]}\n" for key, value in lines) + "\n"


def _container(name: str, short: str, long: str, aggregate: str, limits: str, prefix: str, model: str) -> str:
    text = _stanza(
        [
            ("track", f"{prefix}_{name}"),
            ("container", "multiWig"),
            ("shortLabel", short),
            ("longLabel", f"{long} ({model})"),
            ("type", "bigWig"),
            ("aggregate", aggregate),
            ("showSubtrackColorOnUi", "on"),
            ("viewLimits", limits),
            ("maxHeightPixels", "100:48:16"),
            ("visibility", "full"),
        ]
    )
    for base, colour in COLOURS.items():
        text += _stanza(
            [
                ("track", f"{prefix}_{name}_{base}"),
                ("parent", f"{prefix}_{name}"),
                ("shortLabel", f"{short} {base}"),
                ("longLabel", f"{long}: base {base} ({model})"),
                ("type", "bigWig"),
                ("bigDataUrl", f"{name}_{base}.bw"),
                ("color", colour),
            ],
            "    ",
        )
    return text


def hub_texts(
    tracks: Iterable[str], *, genome: str, model: str, email: str, prefix: str = "hexamer"
) -> dict[str, str]:
    """The three files' contents for the written bigWig ``tracks`` (file stems)."""
    if not _GENOME.match(genome):
        raise ValueError(f"genome must be a UCSC assembly name such as hg38, got {genome!r}")
    names = list(tracks)
    hub = _stanza(
        [
            ("hub", f"{prefix}_tracks"),
            ("shortLabel", "hexamer tracks"),
            ("longLabel", f"Per-base DNA language model tracks from hexamer ({model})"),
            ("genomesFile", "genomes.txt"),
            ("email", email),
        ]
    )
    genomes = _stanza([("genome", genome), ("trackDb", "trackDb.txt")])
    db = ""
    if all(f"prob_{b}" in names for b in COLOURS):
        db += _container(
            "prob", "P(base)", "P(base | context), A/C/G/T stacked", "stacked", "0:1", prefix, model
        )
    if all(f"logprob_{b}" in names for b in COLOURS):
        db += _container(
            "logprob",
            "log P(base)",
            "log P(base | context), nats",
            "transparentOverlay",
            "-6:0",
            prefix,
            model,
        )
    for name, (short, long) in _LABELS.items():
        if name in names:
            limits = {"logprob_ref": "-6:0", "entropy": "0:2", "llr": "-4:4"}[name]
            db += _stanza(
                [
                    ("track", f"{prefix}_{name}"),
                    ("shortLabel", short),
                    ("longLabel", long),
                    ("type", "bigWig"),
                    ("bigDataUrl", f"{name}.bw"),
                    ("viewLimits", limits),
                    ("autoScale", "off"),
                    ("maxHeightPixels", "100:32:16"),
                    ("visibility", "full"),
                ]
            )
    return {"hub.txt": hub, "genomes.txt": genomes, "trackDb.txt": db}


def contig_name_problem(genome: str, contigs: Iterable[str]) -> str | None:
    """Why UCSC would show nothing: contigs named ``20``/``X`` for an assembly that names them
    ``chr20``/``chrX`` (an Ensembl/NCBI FASTA with a UCSC ``--genome``), or None."""
    names = list(contigs)
    if _CHR_NAMED.match(genome) and names and not any(n.startswith("chr") for n in names):
        shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
        return (
            f"the tracks' contigs ({shown}) are not named like {genome}'s (chr1, chr2, ...): the browser "
            "will draw nothing; use a FASTA with UCSC names (or rename its contigs) for the hub"
        )
    return None


def write_hub(
    out_dir: str | Path, tracks: Iterable[str], *, genome: str, model: str, email: str = "unknown@example.org"
) -> list[Path]:
    """Write ``hub.txt``, ``genomes.txt`` and ``trackDb.txt`` into ``out_dir`` (atomically)."""
    out = Path(out_dir)
    written = []
    for name, text in hub_texts(tracks, genome=genome, model=model, email=email).items():
        with atomic_path(out / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
        written.append(out / name)
    return written
