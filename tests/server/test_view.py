"""``/view/`` on ``hexamer serve``: the igv.js page of result files, behind the API key."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import httpx
import pytest

from hexamer.server.app import create_app
from hexamer.server.testing import serve_app_in_thread
from hexamer.server.view_access import COOKIE, SESSION_S, session_cookie_ok, session_token
from hexamer.view import build_site
from hexamer.view.assets import igv_js_path
from hexamer.view.browser import find_chromium, open_page
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


def _session(url: str, **kwargs: object) -> httpx.Response:
    """A login through the form; the 303 that sets the session cookie (not followed)."""
    return httpx.post(f"{url}/view/login", data={"key": KEY}, **kwargs)  # type: ignore[arg-type]


def test_a_browser_logs_in_once_for_a_view_only_cookie(url: str) -> None:
    page = httpx.get(f"{url}/view/")
    assert page.status_code == 401 and '<form method="post" action="login"' in page.text  # the login form
    wrong = httpx.post(f"{url}/view/login", data={"key": "not-the-key"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    got = _session(url)
    assert got.status_code == 303 and got.headers["location"] == "./"
    cookie = SimpleCookie(got.headers["set-cookie"])[COOKIE]
    assert cookie["httponly"] and cookie["samesite"].lower() == "strict" and cookie["path"] == "/view/"
    assert int(cookie["max-age"]) == SESSION_S and not cookie["secure"]  # plain HTTP here
    assert KEY not in got.headers["set-cookie"]  # a MAC of an expiry, not the key
    jar = {"Cookie": f"{COOKIE}={cookie.value}"}
    page = httpx.get(f"{url}/view/", headers=jar)
    assert page.status_code == 200 and "igv.createBrowser" in page.text
    data = (VIEW / "entropy.bw").read_bytes()
    part = httpx.get(f"{url}/view/files/0/entropy.bw", headers={**jar, "Range": "bytes=0-9"})
    assert part.status_code == 206 and part.content == data[:10]
    assert httpx.get(f"{url}/view/igv.min.js", headers=jar).status_code == 200
    # the cookie opens /view/ only: the API still wants the bearer header
    for path in ("/v1/models", "/metrics"):
        assert httpx.get(f"{url}{path}", headers=jar).status_code == 401
        assert httpx.get(f"{url}{path}", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert httpx.post(f"{url}/v1/dna/score", headers=jar, json={"sequences": ["ACGT"]}).status_code == 401


def test_a_key_in_the_query_is_not_taken(url: str) -> None:
    # a query string lands in access logs; the key goes in a form post or a #key= fragment
    got = httpx.get(f"{url}/view/?key={KEY}")
    assert got.status_code == 401 and "set-cookie" not in got.headers
    assert "location.hash" in got.text  # the login page posts a #key= fragment's key itself


def test_forged_or_expired_cookies_are_refused(url: str) -> None:
    now = int(time.time())
    forged = session_token(b"another-key", now + 60)
    expired = session_token(KEY.encode(), now - 1)
    too_long = session_token(KEY.encode(), now + SESSION_S + 3600)
    for value in (forged, expired, too_long, "garbage", f"{now + 60}.", ""):
        jar = {"Cookie": f"{COOKIE}={value}"}
        assert httpx.get(f"{url}/view/files/0/entropy.bw", headers=jar).status_code == 401, value
    assert session_cookie_ok(KEY.encode(), f"{COOKIE}={session_token(KEY.encode(), now + 60)}")


@pytest.mark.browser
@pytest.mark.skipif(find_chromium() is None, reason="no chromium on PATH (apt-get install -y chromium)")
def test_view_opens_in_a_browser_behind_the_key(url: str, tmp_path: Path) -> None:
    for opened in (f"{url}/view/", f"{url}/view/#key=not-the-key"):
        assert not open_page(opened).ready  # the login form, not the page
    shot = tmp_path / "served.png"
    status = open_page(f"{url}/view/#key={KEY}", screenshot=shot)  # the login page posts it, reloads
    assert status.ready and status.errors == [] and status.offsite == [], status.raw
    assert status.tracks == ["ideogram", "ruler", "sequence", "entropy", "scored", "scored HEXAMER_SCORE"]
    drawn = [t["name"] for t in status.raw["dom"] if t["canvas"]]  # no bases at a whole contig's scale
    assert drawn == ["ideogram", "ruler", "entropy", "scored", "scored HEXAMER_SCORE"], status.raw["dom"]
    assert shot.stat().st_size > 10_000
