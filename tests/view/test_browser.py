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
from hexamer.view.report import build_report
from hexamer.view.serving import bind_socket, build_site, view_app
from tests.view.conftest import FASTA, TRACKS, VIEW

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium on PATH (apt-get install -y chromium)"),
]

IGV_OWN = ["ideogram", "ruler", "sequence"]


@pytest.fixture(scope="module")
def view_url() -> Iterator[str]:
    import uvicorn

    site = build_site(TRACKS, FASTA, parse_locus("20:60280-60340"))
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


def test_view_page_draws_its_tracks(view_url: str, tmp_path: Path) -> None:
    shot = tmp_path / "view.png"
    status = open_page(view_url, screenshot=shot)
    assert status.ready, status.raw
    assert status.errors == [] and status.offsite == []
    assert status.tracks == [
        *IGV_OWN,
        "base probabilities (A C G T)",
        "entropy",
        "scored",
        "scored HEXAMER_SCORE",
        "ism (ISM score per alt)",
        "regions",
    ]
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
