"""UCSC track-hub files: stanzas well formed, every track typed, parents and files present."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.tracks import KINDS, hub_texts, track_names, write_hub


def _stanzas(text: str) -> list[dict[str, str]]:
    out = []
    for block in text.strip().split("\n\n"):
        entry = {}
        for line in block.splitlines():
            key, _, value = line.strip().partition(" ")
            assert key and value, f"bad line {line!r}"
            assert key not in entry, f"duplicate {key}"
            entry[key] = value
        out.append(entry)
    return out


def test_hub_files_are_well_formed(tmp_path: Path) -> None:
    names = track_names(KINDS)
    files = write_hub(tmp_path, names, genome="hg38", model="Carbon-3B", email="me@example.org")
    assert [f.name for f in files] == ["hub.txt", "genomes.txt", "trackDb.txt"]
    hub = _stanzas((tmp_path / "hub.txt").read_text())[0]
    assert hub["genomesFile"] == "genomes.txt" and hub["email"] == "me@example.org"
    assert _stanzas((tmp_path / "genomes.txt").read_text()) == [{"genome": "hg38", "trackDb": "trackDb.txt"}]
    tracks = _stanzas((tmp_path / "trackDb.txt").read_text())
    by_name = {t["track"]: t for t in tracks}
    assert len(by_name) == len(tracks)  # names unique
    urls = set()
    for t in tracks:
        assert t["type"] == "bigWig" and len(t["shortLabel"]) <= 17 and len(t["longLabel"]) <= 80
        assert t["track"].replace("_", "").isalnum() and t["track"][0].isalpha()
        if "parent" in t:
            assert by_name[t["parent"]]["container"] == "multiWig"
        if "container" not in t:
            urls.add(t["bigDataUrl"])
    assert urls == {f"{n}.bw" for n in names}  # every written bigWig, relative to trackDb.txt
    logo = by_name["hexamer_prob"]
    assert logo["aggregate"] == "stacked" and logo["viewLimits"] == "0:1"
    colours = {t["track"][-1]: t["color"] for t in tracks if t.get("parent") == "hexamer_prob"}
    assert colours == {"A": "0,150,0", "C": "0,0,230", "G": "255,165,0", "T": "220,0,0"}
    assert by_name["hexamer_logprob"]["aggregate"] == "transparentOverlay"


def test_only_written_tracks_are_listed() -> None:
    db = hub_texts(["entropy"], genome="sacCer3", model="m", email="x@y")["trackDb.txt"]
    assert [s["track"] for s in _stanzas(db)] == ["hexamer_entropy"]


def test_genome_must_be_an_assembly_name() -> None:
    with pytest.raises(ValueError, match="UCSC assembly"):
        hub_texts(["entropy"], genome="hg38 ../x", model="m", email="x@y")


def test_contig_names_that_ucsc_would_not_show() -> None:
    from hexamer.tracks.hub import contig_name_problem

    assert "chr1, chr2" in (contig_name_problem("hg38", ["20", "X"]) or "")
    assert contig_name_problem("hg38", ["chr20"]) is None
    assert contig_name_problem("sacCer3", ["chrI"]) is None and contig_name_problem("sacCer3", ["I"]) is None
