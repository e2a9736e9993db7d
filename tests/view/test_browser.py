"""In headless Chromium, with the network cut: the view page and a report opened from
``file://`` draw igv.js with their tracks, log no console error and request nothing off the
machine. Skipped when no Chromium is installed (``.ci/run`` installs Debian's)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hexamer.view.browser import find_chromium, open_page
from hexamer.view.files import parse_locus
from hexamer.view.page import ism_track_name
from hexamer.view.report import build_report
from hexamer.view.serving import bind_socket, build_site, view_app
from tests.view.conftest import FASTA, TRACKS, VIEW

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium on PATH (apt-get install -y chromium)"),
]

IGV_OWN = ["ideogram", "ruler", "sequence"]
LOCUS = "20:61001-61100"  # the ISM table (61001-61040), a scored variant (61098), a BED region
LOGO_NAME = "base probabilities (A C G T)"


@pytest.fixture(scope="module")
def view_url() -> Iterator[str]:
    import uvicorn

    site = build_site(TRACKS, FASTA, parse_locus(LOCUS))
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(view_app(site), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _ism_snvs() -> list[tuple[int, str, float]]:
    """(0-based start, alt, RawScore) of each SNV of the committed ISM table, read by pysam."""
    import pysam

    with pysam.TabixFile(str(VIEW / "ism.tsv.bgz"), parser=pysam.asTuple()) as tbx:
        rows = [r for c in tbx.contigs for r in tbx.fetch(c)]
    return [(int(r[1]) - 1, r[3], float(r[4])) for r in rows if len(r[2]) == 1 and r[3] in "ACGT"]


def test_view_page_draws_its_tracks(view_url: str, tmp_path: Path) -> None:
    from hexamer.tracks.writers import import_pybigwig

    shot = tmp_path / "view.png"
    status = open_page(view_url, screenshot=shot)
    assert status.ready, status.raw
    assert status.errors == [] and status.offsite == []
    ism_name = ism_track_name("ism", max(abs(v) for _, _, v in _ism_snvs()))
    names = [LOGO_NAME, "entropy", "scored", "scored HEXAMER_SCORE", ism_name, "regions"]
    assert status.tracks == [*IGV_OWN, *names]
    # in the DOM: every track drew a canvas into the page, each of ours under its own label
    dom = status.raw["dom"]
    assert all(t["canvas"] for t in dom), dom
    assert [t["label"] for t in dom[3:]] == names
    assert [t["type"] for t in dom if t["name"] in (LOGO_NAME, ism_name)] == ["hexamerlogo", "hexamerism"]
    # the stacked logo drew the four bigWigs' values (read by igv.js), as pyBigWig reads them
    logo = status.raw["notes"][LOGO_NAME]
    assert logo["positions"] > 100
    start, values = logo["first"]["start"], logo["first"]["values"]
    for base, got in zip("ACGT", values, strict=True):
        bw = import_pybigwig().open(str(VIEW / f"prob_{base}.bw"))
        try:
            (want,) = bw.values("20", start, start + 1)
        finally:
            bw.close()
        assert got == pytest.approx(want, abs=1e-6)
    assert sum(values) == pytest.approx(1.0, abs=1e-3)
    # the heat-map drew one cell per SNV of the table (all within the drawn span), first one first
    ism = status.raw["notes"][ism_name]
    snvs = _ism_snvs()
    assert ism["cells"] == len(snvs)
    first = min(snvs)
    assert (ism["first"]["start"], ism["first"]["alt"]) == first[:2]
    assert ism["first"]["value"] == pytest.approx(first[2])
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_report_opens_from_disk_offline(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    build_report(VIEW / "scored.vcf", FASTA, out, tracks=[VIEW / "entropy.bw"])
    shot = tmp_path / "report.png"
    status = open_page(f"{out.as_uri()}#row=3", screenshot=shot)
    assert status.ready, status.raw
    assert status.errors == [] and status.offsite == []
    assert status.tracks == [*IGV_OWN, "variants (colour: score)", "entropy"]
    assert shot.stat().st_size > 10_000
