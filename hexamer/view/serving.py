"""Serving the view: only the files given (and their indexes), by a fixed table of URLs.

A URL names a file by its number and name (``files/3/prob_A.bw``) and is looked up in the table
built at start: no part of a URL ever becomes a file-system path, so there is no traversal and no
listing; anything else is 404. Files go out through Starlette's ``FileResponse``, which answers
``Range: bytes=a-b`` with 206 and ``Content-Range`` (what igv.js asks of bigWig, tabix and FASTA
index files: a server that ignores Range sends whole files).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from hexamer.view.assets import IGV_JS, igv_js_path
from hexamer.view.files import Locus, ViewError, check_contigs, classify, expand_folders, fasta_contigs
from hexamer.view.page import browser_config, page_html

__all__ = ["ViewSite", "bind_socket", "build_site", "view_app"]

_TYPES = {".fai": "text/plain", ".gzi": "application/octet-stream"}


@dataclass
class ViewSite:
    """The page and the table of files it may fetch (URL tail -> path)."""

    html: str
    files: dict[str, Path]


def build_site(paths: Sequence[str | Path], fasta: str | Path | None, region: Locus | None) -> ViewSite:
    """Check every file (``ViewError`` naming the first bad one) and build the page; a folder in
    ``paths`` stands for the files in it that igv.js can show."""
    given = [classify(p) for p in expand_folders(paths)]
    references = [vf for vf in given if vf.kind == "fasta"]
    if fasta is not None:
        references.insert(0, classify(fasta))
        if references[0].kind != "fasta":
            raise ViewError(f"--fasta {fasta}: not a FASTA file (.fa, .fasta, .fna, optionally .gz)")
    if not references:
        raise ViewError("no reference: give --fasta REF.fa (indexed with samtools faidx)")
    ref, tracks = references[0], [vf for vf in given if vf.path != references[0].path]
    if any(vf.kind == "fasta" for vf in tracks):
        raise ViewError(
            f"{next(vf.path for vf in tracks if vf.kind == 'fasta')}: a second FASTA; give one reference"
        )
    if not tracks:
        raise ViewError("nothing to show: give track, VCF, BED or ISM files besides the reference")
    contigs = fasta_contigs(ref)
    check_contigs(tracks, contigs, region)
    if region is None:  # igv.js would look its default locus up on igv.org: name it outright
        first, length = next(iter(contigs.items()))
        region = Locus(first, 1, length)
    table: dict[str, Path] = {}

    def url_of(path: Path) -> str:
        key = next((k for k, v in table.items() if v == path), None)
        if key is None:
            key = f"{len(table)}/{quote(path.name)}"
            table[key] = path
        return f"files/{key}"

    parts = browser_config(ref, tracks, url_of, region)
    return ViewSite(page_html(ref, tracks, parts), table)


def view_app(site: ViewSite) -> Starlette:
    """The ASGI app: ``/`` the page, ``/igv.min.js``, ``/files/<n>/<name>`` the files given."""
    igv_js = igv_js_path()

    async def page(_: Request) -> Response:
        return HTMLResponse(site.html, headers={"Cache-Control": "no-store"})

    async def script(_: Request) -> Response:
        return FileResponse(igv_js, media_type="text/javascript")

    async def file(request: Request) -> Response:
        tail = f"{request.path_params['n']}/{quote(request.path_params['name'])}"
        path = site.files.get(tail)
        if path is None:
            return PlainTextResponse("not found", status_code=404)
        media = _TYPES.get(path.suffix, "application/octet-stream")
        return FileResponse(path, media_type=media, headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", page, methods=["GET", "HEAD"]),
        Route(f"/{IGV_JS}", script, methods=["GET", "HEAD"]),
        Route("/files/{n:int}/{name}", file, methods=["GET", "HEAD"]),
    ]
    return Starlette(routes=routes)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free one), or ``ViewError`` saying it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ViewError(f"port {port} on {host} is in use (another hexamer view?); pass --port") from exc
        raise ViewError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(64)
    return sock
