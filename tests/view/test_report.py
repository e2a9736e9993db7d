"""``hexamer report``: one self-contained page whose embedded data are the inputs' own values."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pysam
import pytest

from hexamer.view.assets import igv_js_path
from hexamer.view.files import ViewError
from hexamer.view.report import build_report
from tests.view.conftest import FASTA, VIEW


def _data(page: str) -> dict:
    found = re.search(r"var data = (\{.*?\});\n", page)
    assert found, "no data in the report"
    return json.loads(found[1].replace("<\\/", "</"))


def test_report_embeds_everything(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    tracks = [VIEW / "logprob_ref.bw", VIEW / "entropy.bw"]
    result = build_report(VIEW / "scored.vcf.gz", FASTA, out, tracks=tracks, flank=30)
    page = out.read_text()
    assert (result.n_records, result.n_rows, result.n_bytes) == (9, 9, out.stat().st_size)
    assert igv_js_path().read_text() in page.replace("<\\/script", "</script")  # igv.js inlined, unchanged
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)  # nothing loaded from elsewhere
    data = _data(page)
    assert data["columns"][:9] == ["chrom", "pos", "id", "ref", "alt", "score", "phred", "status", "reason"]
    assert data["columns"][9:] == ["AC", "AN"]  # the input's INFO fields, carried
    row = next(r for r in data["rows"] if r[2] == "rs6078030")
    assert row[:9] == ["20", 61098, "rs6078030", "C", "T", 1.1062, None, "ok", None]
    assert row[9:11] == [225, 996]
    window = data["windows"][row[-1]]
    with pysam.FastaFile(str(FASTA)) as fa:  # the reference bases, read by pysam
        assert window["seq"] == fa.fetch("20", 61097 - 30, 61098 + 30).upper()
    assert window["start"] == 61097 - 30 and window["len"] == 440_000
    import pyBigWig

    bw = pyBigWig.open(str(tracks[0]))
    expected = np.asarray(bw.values("20", window["start"], window["start"] + len(window["seq"])))
    bw.close()
    got = np.asarray([np.nan if v is None else v for v in window["values"][0]])
    np.testing.assert_allclose(got, expected, rtol=1e-3)  # 4 significant digits


def test_report_rows_outside_the_tracks_get_no_values(tmp_path: Path) -> None:
    build_report(VIEW / "scored.vcf", FASTA, tmp_path / "r.html", tracks=[VIEW / "entropy.bw"], flank=5)
    data = _data((tmp_path / "r.html").read_text())
    far = data["windows"][data["rows"][-1][-1]]  # 20:421808, outside the tracks' 20:60001-62000
    assert far["values"] == [[None] * len(far["seq"])]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"vcf": VIEW / "entropy.bw"}, "not a VCF"),
        ({"fasta": VIEW / "scored.vcf"}, "not a FASTA"),
        ({"tracks": [VIEW / "regions.bed"]}, "regions.bed: a report embeds bigWig tracks only"),
        ({"flank": 5001}, "--flank must be 0 to 5,000"),
    ],
)
def test_report_refuses_bad_input(tmp_path: Path, args: dict, expected: str) -> None:
    kwargs = {"vcf": VIEW / "scored.vcf", "fasta": FASTA, **args}
    with pytest.raises(ViewError, match=expected):
        build_report(kwargs.pop("vcf"), kwargs.pop("fasta"), tmp_path / "r.html", **kwargs)
    assert not (tmp_path / "r.html").exists()


def test_unreadable_record_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.vcf"
    head = "##fileformat=VCFv4.2\n##contig=<ID=20>\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
    bad.write_text(head + "20\t60309\t.\tG\tT\t.\t.\t.\n20\tnot_a_number\t.\tG\tT\t.\t.\t.\n")
    with pytest.raises(ViewError, match=r"bad\.vcf: record 2 cannot be read"):
        build_report(bad, FASTA, tmp_path / "r.html")


def test_title_is_text(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    build_report(VIEW / "scored.vcf", FASTA, out, title="<b>@@DATA@@</b>")
    page = out.read_text()
    assert page.count("<title>&lt;b&gt;@@DATA@@&lt;/b&gt;</title>") == 1 and page.count("var data = ") == 1


def test_a_compressed_vcf_needs_no_index(tmp_path: Path) -> None:
    import shutil

    bare = tmp_path / "scored.vcf.gz"
    shutil.copy(VIEW / "scored.vcf.gz", bare)
    assert build_report(bare, FASTA, tmp_path / "r.html").n_rows == 9
