"""A browser's way into ``/view/`` on a server with an API key.

igv.js fetches the page's files itself and cannot add an ``Authorization`` header to each
request, so the key is checked once — posted from the login form ``/view/`` shows, or by that
page itself from ``/view/#key=KEY`` (a fragment never reaches the server, so no log or proxy
sees it; a ``?key=`` query would land in the access log and is not accepted) — and answered with a
session cookie: ``<expiry>.<HMAC-SHA256 of the expiry
under the key>``, never the key itself, ``HttpOnly`` (scripts cannot read it), ``SameSite=Strict``
(no other site's page can make the browser send it), ``Path=/view/`` and ``Secure`` over HTTPS.
The cookie opens ``/view/`` paths only; every API route still needs the bearer header. Keys and
MACs are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

__all__ = [
    "COOKIE",
    "LOGIN_PATH",
    "SESSION_S",
    "is_view_path",
    "login",
    "login_page",
    "session_cookie_ok",
    "session_token",
]

COOKIE = "hexamer_view"
LOGIN_PATH = "/view/login"
#: how long a browser session lasts before the key must be given again
SESSION_S = 12 * 3600
_MAX_FORM_BYTES = 4096


def is_view_path(path: str) -> bool:
    """``/view`` and everything under ``/view/``: the only paths the session cookie opens."""
    return path == "/view" or path.startswith("/view/")


def _mac(key: bytes, expires: int) -> str:
    return hmac.new(key, f"hexamer-view-session:{expires}".encode(), hashlib.sha256).hexdigest()


def session_token(key: bytes, expires: int) -> str:
    """The cookie's value for a session ending at ``expires`` (Unix seconds)."""
    return f"{expires}.{_mac(key, expires)}"


def session_cookie_ok(key: bytes, cookie_header: str, now: float | None = None) -> bool:
    """Whether the ``Cookie`` header holds an unexpired session token made with ``key``."""
    try:
        jar = SimpleCookie(cookie_header)
    except CookieError:
        return False
    morsel = jar.get(COOKIE)
    if morsel is None:
        return False
    expires_text, _, mac = morsel.value.partition(".")
    if not expires_text.isdigit():
        return False
    expires = int(expires_text)
    now = time.time() if now is None else now
    if not now < expires <= now + SESSION_S + 60:
        return False
    return hmac.compare_digest(mac.encode(), _mac(key, expires).encode())


def _key_ok(key: bytes, given: str) -> bool:
    return hmac.compare_digest(given.encode(), key)


def _with_session(response: Response, key: bytes, secure: bool) -> Response:
    expires = int(time.time()) + SESSION_S
    response.set_cookie(
        COOKIE,
        session_token(key, expires),
        max_age=SESSION_S,
        path="/view/",
        secure=secure,
        httponly=True,
        samesite="strict",
    )
    return response


_AUTO_LOGIN = """<script>
(function () {
  var m = /[#&]key=([^&]*)/.exec(location.hash), note = document.getElementById("note");
  if (!m) return;
  history.replaceState(null, "", location.pathname + location.search);  // the key leaves the address bar
  fetch("@ACTION@", { method: "POST", body: new URLSearchParams({ key: decodeURIComponent(m[1]) }) })
    .then(function (r) { if (r.ok) location.replace(location.pathname + location.search); else note.textContent = "Wrong key."; })
    .catch(function (e) { note.textContent = String(e); });
})();
</script>"""


def login_page(path: str, message: str = "This page needs the server's API key.") -> HTMLResponse:
    """401 with a form that posts the key to ``/view/login`` (a relative address, so it also works
    behind a proxy that mounts the server under a prefix); opened as ``/view/#key=KEY`` it posts
    the fragment's key itself and reloads."""
    action = "login" if path.endswith("/") else "view/login"
    body = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>hexamer view: key</title></head>'
        '<body style="font:14px system-ui,sans-serif;margin:3em">'
        f'<h1>hexamer view</h1><p id="note">{html.escape(message)}</p>'
        f'<form method="post" action="{action}"><label>API key <input type="password" name="key" '
        'autocomplete="current-password" autofocus></label> <button type="submit">Open</button></form>'
        f"{_AUTO_LOGIN.replace('@ACTION@', action)}</body></html>"
    )
    return HTMLResponse(body, status_code=401, headers={"Cache-Control": "no-store"})


async def login(request: Request, key: bytes) -> Response:
    """``POST /view/login`` (a form with ``key``): the session cookie and a redirect to ``/view/``,
    or the login page again (401) for a wrong key."""
    body = await request.body()
    if len(body) > _MAX_FORM_BYTES:
        return login_page("/view/", "The form is too large.")
    given = parse_qs(body.decode("latin-1")).get("key", [""])[0]
    if not given or not _key_ok(key, given):
        return login_page("/view/", "Wrong key.")
    secure = request.url.scheme == "https"
    return _with_session(RedirectResponse("./", status_code=303), key, secure)
