"""``/view/`` on ``hexamer serve``: the igv.js page of result files, behind the API key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hexamer.server.app import create_app
from hexamer.server.testing import serve_app_in_thread
from hexamer.view import build_site
from hexamer.view.assets import igv_js_path
from tests.view.conftest import FASTA, VIEW

KEY = "view-key"


@pytest.fixture(scope="module")
def url(tiny_folder: Path) -> Iterator[str]:
    site = build_site([FASTA, VIEW / "entropy.bw", VIEW / "scored.vcf.gz"], None, None)
    with serve_app_in_thread(create_app(tiny_folder, api_key=KEY, max_model_len=64, view=site)) as served:
        yield served


def test_view_is_behind_the_key(url: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    assert httpx.get(f"{url}/view/").status_code == 401
    assert httpx.get(f"{url}/view/igv.min.js").status_code == 401
    page = httpx.get(f"{url}/view/", headers=auth)
    assert page.status_code == 200 and "igv.createBrowser" in page.text
    assert httpx.get(f"{url}/view", headers=auth, follow_redirects=True).url.path == "/view/"
    js = httpx.get(f"{url}/view/igv.min.js", headers=auth)
    assert js.status_code == 200 and js.content == igv_js_path().read_bytes()


def test_view_files_answer_range(url: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    data = (VIEW / "entropy.bw").read_bytes()
    got = httpx.get(f"{url}/view/files/0/entropy.bw", headers={**auth, "Range": "bytes=10-29"})
    assert got.status_code == 206 and got.content == data[10:30]
    assert got.headers["content-range"] == f"bytes 10-29/{len(data)}"
    assert httpx.get(f"{url}/view/files/0/README.md", headers=auth).status_code == 404
    assert httpx.get(f"{url}/view/files/0/entropy.bw").status_code == 401
