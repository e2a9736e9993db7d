"""The igv.js configuration of each kind of file, and the page around it."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from hexamer.tracks.writers import BedGraphWriter
from hexamer.view.files import classify
from hexamer.view.page import browser_config, ism_track_name, page_html, script_json
from tests.view.conftest import FASTA, VIEW


def _url(path: Path) -> str:
    return f"files/{path.name}"


def test_each_kind_of_track(tmp_path: Path) -> None:
    bedgraph = tmp_path / "entropy.bedGraph"
    writer = BedGraphWriter(bedgraph, name="entropy", description="entropy")
    writer.write("20", 60_000, np.linspace(0, 2, 50, dtype=np.float32))
    writer.commit()
    files = [classify(p) for p in (bedgraph, VIEW / "scored.vcf", VIEW / "regions.bed", VIEW / "entropy.bw")]
    parts = browser_config(classify(FASTA), files, _url, None)
    assert parts.config["tracks"][0] == {
        "type": "wig",
        "format": "bedgraph",
        "name": "entropy",
        "url": "files/entropy.bedGraph",
        "indexed": False,
    }
    kinds = [(t["type"], t.get("format")) for t in parts.config["tracks"]]
    assert kinds == [
        ("wig", "bedgraph"),
        ("variant", "vcf"),
        ("wig", None),
        ("annotation", "bed"),
        ("wig", "bigwig"),
    ]
    vcf = parts.config["tracks"][1]
    assert vcf["colorBy"] == "HEXAMER_STATUS" and vcf["indexed"] is False and "locus" not in parts.config
    assert parts.config["reference"] == {
        "id": "chr20_slice",
        "name": "chr20_slice",
        "fastaURL": "files/chr20_slice.fa.gz",
        "indexURL": "files/chr20_slice.fa.gz.fai",
        "compressedIndexURL": "files/chr20_slice.fa.gz.gzi",
    }


def test_page_escapes_what_it_embeds(tmp_path: Path) -> None:
    assert script_json({"a": "</script><!--"}) == '{"a":"<\\/script><\\!--"}'
    odd = tmp_path / "<b>x<i>.bed"
    odd.write_text("20\t1\t5\n")
    vf = classify(odd)
    page = page_html(classify(FASTA), [vf], browser_config(classify(FASTA), [vf], _url, None))
    side = page[page.index('<nav id="side">') : page.index("</nav>")]
    assert "<b>" not in side and "&lt;b&gt;x&lt;i&gt;.bed" in side


def test_one_logo_per_run(tmp_path: Path) -> None:
    import shutil

    files = []
    for run in ("run1", "run2"):
        (tmp_path / run).mkdir()
        for base in "TGCA":  # any order: the merged track is A C G T
            shutil.copy(VIEW / f"prob_{base}.bw", tmp_path / run / f"prob_{base}.bw")
            files.append(classify(tmp_path / run / f"prob_{base}.bw"))
    lone = tmp_path / "prob_A.bw"  # a prob_A without its three others: a plain track
    shutil.copy(VIEW / "prob_A.bw", lone)
    parts = browser_config(classify(FASTA), [*files, classify(lone)], _url, None)
    names = [t["name"] for t in parts.config["tracks"]]
    assert names == ["base probabilities (A C G T) run1", "base probabilities (A C G T) run2", "prob_A"]
    logo = parts.config["tracks"][0]
    assert logo["type"] == "hexamerlogo" and [t["name"] for t in logo["tracks"]] == list("ACGT")
    assert [Path(t["url"]).name for t in logo["tracks"]] == [f"prob_{b}.bw" for b in "ACGT"]
    assert {t["format"] for t in logo["tracks"]} == {"bigwig"}  # read by igv.js's own bigWig reader


def test_ism_heat_map_holds_every_snv_of_the_table() -> None:
    import pysam

    parts = browser_config(classify(FASTA), [classify(VIEW / "ism.tsv.bgz")], _url, None)
    (track,) = parts.config["tracks"]
    with pysam.TabixFile(str(VIEW / "ism.tsv.bgz"), parser=pysam.asTuple()) as tbx:  # through its index
        rows = [r for c in tbx.contigs for r in tbx.fetch(c)]
    snvs = [(r[0], int(r[1]), r[2], r[3], float(r[4])) for r in rows if len(r[2]) == 1 and r[3] in "ACGT"]
    assert track["type"] == "hexamerism" and len(snvs) > 100
    got = {
        (f["chr"], f["start"] + 1, f["ref"], alt): v
        for f in track["features"]
        for alt, v in f["scores"].items()
    }
    assert got == {s[:4]: s[4] for s in snvs}
    span = max(abs(s[4]) for s in snvs)
    assert track["span"] == span and track["name"] == ism_track_name("ism", span)
    assert all(f["end"] == f["start"] + 1 and f["ref"] not in f["scores"] for f in track["features"])
    assert not parts.notes


def test_malformed_inline_rows_are_named(tmp_path: Path) -> None:
    import pytest

    from hexamer.view.files import ViewError

    bad = tmp_path / "bad.vcf"
    head = "##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    bad.write_text(head + "20\tx\t.\tG\tT\t.\t.\tHEXAMER_SCORE=1\n")
    with pytest.raises(ViewError, match=r"bad\.vcf: not a VCF record"):
        browser_config(classify(FASTA), [classify(bad)], _url, None)
    ism = tmp_path / "ism.tsv.gz"
    with gzip.open(ism, "wt") as f:
        f.write("#Chrom\tPos\tRef\tAlt\tRawScore\tPHRED\n20\tx\tA\tC\t0.1\t\n")
    (tmp_path / "ism.tsv.gz.tbi").write_bytes(b"")  # present: the rows are read whole, not by the index
    with pytest.raises(ViewError, match=r"ism\.tsv\.gz: not a CADD-layout row"):
        browser_config(classify(FASTA), [classify(ism)], _url, None)
