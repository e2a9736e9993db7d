"""The igv.js configuration of each kind of file, and the page around it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hexamer.tracks.writers import BedGraphWriter
from hexamer.view.files import classify
from hexamer.view.page import browser_config, page_html, script_json
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
