"""The ``hexamer view`` page: the igv.js configuration of the files given and the HTML around it.

Every URL in the configuration is relative (``files/<n>/<name>``, ``igv.min.js``), so the same
page works at ``/`` of ``hexamer view`` and at ``/view/`` of ``hexamer serve``. The four
``prob_A`` … ``prob_T`` bigWigs of one ``hexamer track`` run are one ``hexamerlogo`` track (the
probabilities stacked per base, in igv.js's base colours); a scored VCF gets a variant track
coloured by ``HEXAMER_STATUS`` (click a variant for its INFO fields) and a bar track of its
``HEXAMER_SCORE``; an ISM table is one ``hexamerism`` heat-map track (alternative base x
position). The two ``hexamer*`` track types are igv.js track classes shipped beside the page
(``hexamer/data/view/tracks.js``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hexamer.view.assets import fill, template
from hexamer.view.files import Locus, ViewFile
from hexamer.view.inline import BASE_COLOURS, InlineTrack, ism_table, vcf_score_features

__all__ = [
    "INLINE_LIMIT",
    "STATUS_COLOURS",
    "PageParts",
    "browser_config",
    "ism_track_name",
    "page_html",
    "script_json",
]

#: most features drawn from one VCF's scores or one ISM table (the page carries them)
INLINE_LIMIT = 200_000
STATUS_COLOURS = {"ok": "#1b7837", "skipped": "#999999", "ref_mismatch": "#e08214", "failed": "#b2182b"}
_LOGO = ("prob_A", "prob_C", "prob_G", "prob_T")

UrlOf = Callable[[Path], str]


def script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</script>`` can end it early)."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/").replace("<!--", "<\\!--")


@dataclass
class PageParts:
    """The igv.js configuration and what the side list says about tracks drawn only in part."""

    config: dict[str, Any]
    notes: dict[Path, str]


def _reference(fasta: ViewFile, url_of: UrlOf) -> dict[str, Any]:
    ref: dict[str, Any] = {"id": fasta.label, "name": fasta.label, "fastaURL": url_of(fasta.path)}
    if fasta.index is not None:
        ref["indexURL"] = url_of(fasta.index)
    if fasta.gzi is not None:
        ref["compressedIndexURL"] = url_of(fasta.gzi)
    return ref


def _with_index(track: dict[str, Any], vf: ViewFile, url_of: UrlOf) -> dict[str, Any]:
    if vf.index is not None:
        track["indexURL"] = url_of(vf.index)
    else:
        track["indexed"] = False
    return track


def _inline(name: str, inline: InlineTrack) -> dict[str, Any]:
    """A one-series inline track (a scored VCF's ``HEXAMER_SCORE``) as an igv.js bar track."""
    (features,) = inline.series.values()
    return {"type": "wig", "name": name, "features": features, "color": "#4a4a8a"}


def _logos(files: Sequence[ViewFile]) -> dict[Path, list[ViewFile]]:
    """Per folder (one ``hexamer track`` run) holding all four prob_A … prob_T bigWigs: those four."""
    by_folder: dict[Path, dict[str, ViewFile]] = {}
    for vf in files:
        if vf.kind == "bigwig" and vf.label in _LOGO:
            by_folder.setdefault(vf.path.parent, {})[vf.label] = vf
    return {folder: [found[n] for n in _LOGO] for folder, found in by_folder.items() if len(found) == 4}


def _logo_track(members: Sequence[ViewFile], url_of: UrlOf, name: str) -> dict[str, Any]:
    """The four probability bigWigs as one stacked track (``hexamerlogo`` of tracks.js), read by
    igv.js's own bigWig reader, one member per base in A C G T order."""
    parts = [{**_file_track(t, url_of), "name": t.label[-1]} for t in members]
    return {"type": "hexamerlogo", "name": name, "tracks": parts, "height": 60, "colors": BASE_COLOURS}


def ism_track_name(label: str, span: float) -> str:
    """The heat-map's name, which is its legend: rows and the colour scale."""
    return f"{label} ISM (rows A C G T; red -{span:.3g} … 0 … +{span:.3g} blue)"


def _ism_track(vf: ViewFile) -> tuple[dict[str, Any], int]:
    """An ISM table as one ``hexamerism`` heat-map track (tracks.js); and how many rows were left out."""
    table = ism_table(vf, INLINE_LIMIT)
    span = table.span or 1.0
    track = {
        "type": "hexamerism",
        "name": ism_track_name(vf.label, span),
        "features": table.positions,
        "span": span,
        "height": 48,
        "colors": BASE_COLOURS,
    }
    return track, table.left_out


def _file_track(vf: ViewFile, url_of: UrlOf) -> dict[str, Any]:
    url = url_of(vf.path)
    if vf.kind == "bigwig":
        return {"type": "wig", "format": "bigwig", "name": vf.label, "url": url}
    if vf.kind == "bedgraph":
        return _with_index({"type": "wig", "format": "bedgraph", "name": vf.label, "url": url}, vf, url_of)
    if vf.kind == "bed":
        return _with_index({"type": "annotation", "format": "bed", "name": vf.label, "url": url}, vf, url_of)
    track = {
        "type": "variant",
        "format": "vcf",
        "name": vf.label,
        "url": url,
        "displayMode": "EXPANDED",
        "colorBy": "HEXAMER_STATUS",
        "colorTable": STATUS_COLOURS,
    }
    return _with_index(track, vf, url_of)


def browser_config(
    fasta: ViewFile, files: Sequence[ViewFile], url_of: UrlOf, locus: Locus | str | None
) -> PageParts:
    """igv.js's ``createBrowser`` configuration for ``files`` on ``fasta``; nothing in it points
    off this machine (``loadDefaultGenomes`` is off, so igv.js fetches no genome list)."""
    notes: dict[Path, str] = {}
    logos = _logos(files)
    in_logo = {vf.path: folder for folder, members in logos.items() for vf in members}
    tracks: list[dict[str, Any]] = []
    for vf in files:
        if vf.path in in_logo:
            folder = in_logo[vf.path]
            if folder in logos:  # the first of its four: the stacked track goes here
                name = "base probabilities (A C G T)" + (f" {folder.name}" if len(in_logo) > 4 else "")
                tracks.append(_logo_track(logos.pop(folder), url_of, name))
            continue
        if vf.kind == "ism":
            track, left_out = _ism_track(vf)
            tracks.append(track)
            if left_out:
                notes[vf.path] = f"first {INLINE_LIMIT:,} SNVs drawn, {left_out:,} left out"
            continue
        tracks.append(_file_track(vf, url_of))
        inline = vcf_score_features(vf, INLINE_LIMIT) if vf.kind == "vcf" else None
        if inline is not None:
            tracks.append(_inline(f"{vf.label} HEXAMER_SCORE", inline))
            if inline.left_out:
                notes[vf.path] = f"first {inline.n_features:,} drawn, {inline.left_out:,} left out"
    config: dict[str, Any] = {
        "reference": _reference(fasta, url_of),
        "tracks": tracks,
        "loadDefaultGenomes": False,
        "showCursorGuide": True,
    }
    if locus is not None:
        config["locus"] = str(locus)
    return PageParts(config, notes)


def _sidebar(fasta: ViewFile, files: Sequence[ViewFile], notes: dict[Path, str]) -> str:
    """The loaded runs: the files grouped by the folder they came from."""
    groups: dict[Path, list[ViewFile]] = {}
    for vf in (fasta, *files):
        groups.setdefault(vf.path.parent, []).append(vf)
    out = []
    for folder, members in groups.items():
        summary = " (run summary beside)" if (folder / "summary.json").is_file() else ""
        items = "".join(
            f'<li>{html.escape(vf.name)} <span class="kind">{vf.kind}, {vf.path.stat().st_size:,} B</span>'
            + (f'<br><span class="note">{html.escape(notes[vf.path])}</span>' if vf.path in notes else "")
            + "</li>"
            for vf in members
        )
        out.append(f"<h2>{html.escape(str(folder))}{summary}</h2><ul>{items}</ul>")
    return "".join(out)


def page_html(fasta: ViewFile, files: Sequence[ViewFile], parts: PageParts) -> str:
    """The whole page; igv.js is loaded from ``igv.min.js`` beside it."""
    values = {
        "PROBE": template("probe.js"),
        "TRACKS": template("tracks.js"),
        "SIDEBAR": _sidebar(fasta, files, parts.notes),
        "CONFIG": script_json(parts.config),
    }
    return fill(template("viewer.html"), values)
