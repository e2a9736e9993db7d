"""The HTTP contract of ``hexamer view``: the page, igv.js from the package, 206 with the right
bytes for Range requests on bigWig, tabix and FASTA-index files, 404 for anything not given."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from hexamer.view.assets import IGV_VERSION, igv_js_path
from hexamer.view.files import ViewError, parse_locus
from hexamer.view.page import ism_track_name
from hexamer.view.serving import ViewSite, bind_socket, build_site, view_app
from tests.view.conftest import FASTA, TRACKS, VIEW

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site() -> ViewSite:
    return build_site(TRACKS, FASTA, parse_locus("20:60280-60340"))


@pytest.fixture(scope="module")
def client(site: ViewSite) -> TestClient:
    return TestClient(view_app(site))


def _config(page: str) -> dict:
    found = re.search(r"var config = (\{.*?\});\n", page)
    assert found, "no igv.js configuration in the page"
    return json.loads(found[1].replace("<\\/", "</"))


def test_page_points_only_at_served_files(client: TestClient, site: ViewSite) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="igv.min.js"></script>' in page.text
    assert (
        "https://" not in page.text.split("<script>")[0] + page.text.split("</nav>")[1].split("<script>")[0]
    )
    config = _config(page.text)
    assert config["loadDefaultGenomes"] is False and config["locus"] == "20:60280-60340"
    urls = [config["reference"][k] for k in ("fastaURL", "indexURL", "compressedIndexURL")]
    for track in config["tracks"]:
        for t in track.get("tracks", [track]):
            urls += [t[k] for k in ("url", "indexURL") if k in t]
    assert sorted(urls) == sorted(f"files/{k}" for k in site.files)
    names = [t["name"] for t in config["tracks"]]
    assert names == [
        "base probabilities (A C G T)",
        "entropy",
        "scored",
        "scored HEXAMER_SCORE",
        ism_track_name("ism", 3.92791),
        "regions",
    ]
    logo = config["tracks"][0]
    assert logo["type"] == "hexamerlogo" and [t["name"] for t in logo["tracks"]] == list("ACGT")
    assert config["tracks"][4]["type"] == "hexamerism"
    assert 'igv.registerTrackClass("hexamerlogo"' in page.text  # the track classes travel in the page
    scores = config["tracks"][3]["features"]  # one bar per scored record, at its 0-based position
    assert len(scores) == 9 and scores[0] == {"chr": "20", "start": 60308, "end": 60309, "value": -0.364474}


def test_igv_js_is_the_shipped_copy(client: TestClient) -> None:
    shipped = igv_js_path().read_bytes()
    got = client.get("/igv.min.js")
    assert got.status_code == 200 and got.content == shipped
    assert got.headers["content-type"].startswith("text/javascript")
    provenance = (igv_js_path().parent / "PROVENANCE").read_text()
    assert f"version:   {IGV_VERSION}" in provenance
    assert (igv_js_path().parent / "LICENSE").read_text().startswith("The MIT License")


@pytest.mark.parametrize(
    "name", ["prob_A.bw", "scored.vcf.gz.tbi", "chr20_slice.fa.gz.fai", "chr20_slice.fa.gz"]
)
def test_range_gives_206_and_the_bytes(client: TestClient, site: ViewSite, name: str) -> None:
    key, path = next((k, p) for k, p in site.files.items() if p.name == name)
    data = path.read_bytes()
    for a, b in ((0, 3), (5, len(data) - 1), (len(data) - 7, len(data) + 100)):
        got = client.get(f"/files/{key}", headers={"Range": f"bytes={a}-{b}"})
        last = min(b, len(data) - 1)
        assert got.status_code == 206, (name, a, b)
        assert got.headers["content-range"] == f"bytes {a}-{last}/{len(data)}"
        assert got.content == data[a : last + 1]
    suffix = client.get(f"/files/{key}", headers={"Range": "bytes=-10"})
    assert suffix.status_code == 206 and suffix.content == data[-10:]
    whole = client.get(f"/files/{key}")
    assert whole.status_code == 200 and whole.content == data
    past = client.get(f"/files/{key}", headers={"Range": f"bytes={len(data) + 5}-{len(data) + 9}"})
    assert past.status_code == 416


@pytest.mark.parametrize(
    "url",
    [
        "/files/0/entropy.bw",  # a served number with another file's name
        "/files/99/prob_A.bw",
        "/files/",
        "/files/0/",
        "/files/0/..%2F..%2Fconftest.py",
        "/files/0/../../../etc/passwd",
        "/files/..%2Fetc/passwd",
        "/tests/data/view/prob_A.bw",
        f"/files/0/{'prob_A.bw'.upper()}",
        "/igv.min.js.map",
    ],
)
def test_anything_not_given_is_404(client: TestClient, url: str) -> None:
    assert client.get(url).status_code == 404


def test_port_in_use_is_named() -> None:
    held = bind_socket("127.0.0.1", 0)
    try:
        port = held.getsockname()[1]
        with pytest.raises(ViewError, match=f"port {port} on 127.0.0.1 is in use"):
            bind_socket("127.0.0.1", port)
    finally:
        held.close()


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``hexamer view`` itself, in a subprocess on a free port of 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "hexamer", "view", *map(str, TRACKS), "--fasta", str(FASTA)]
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--no-browser"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url, timeout=1.0)
                break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"hexamer view did not start: {proc.communicate()[1].decode()}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_command_serves_over_http(served: str) -> None:
    page = httpx.get(served)
    assert page.status_code == 200 and "igv.createBrowser" in page.text
    config = _config(page.text)
    bw = config["tracks"][1]["url"]
    data = (VIEW / "entropy.bw").read_bytes()
    got = httpx.get(served + bw, headers={"Range": "bytes=100-199"})
    assert got.status_code == 206 and got.headers["content-range"] == f"bytes 100-199/{len(data)}"
    assert got.content == data[100:200]
    assert httpx.get(served + "files/0/../../README.md").status_code == 404
    assert httpx.get(served + "files").status_code == 404


def test_without_region_the_page_opens_on_the_first_contig() -> None:
    site = build_site([FASTA, VIEW / "entropy.bw"], None, None)
    # named outright: igv.js would otherwise look its default locus up on igv.org
    assert _config(site.html)["locus"] == "20:1-440000"
