"""Take the screenshots of docs/view.md from the real pages: ``hexamer view`` and ``hexamer report``
on the files of tests/data/view, in headless Chromium, saved as small palette PNGs in docs/img.

    python scripts/view_screenshots.py
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import uvicorn
from PIL import Image

from hexamer.view import bind_socket, build_report, build_site, parse_locus, view_app
from hexamer.view.browser import open_page

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("tests") / "data"  # relative to ROOT: the side list shows these folder names
VIEW = DATA / "view"
FASTA = DATA / "vep" / "chr20_slice.fa.gz"
IMG = ROOT / "docs" / "img"


def _save_small(shot: Path, out: Path) -> None:
    """A 256-colour PNG: the pages are flat colours, so nothing visible is lost."""
    Image.open(shot).convert("RGB").quantize(colors=256).save(out, optimize=True)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")


def main() -> None:
    os.chdir(ROOT)
    IMG.mkdir(parents=True, exist_ok=True)
    tracks = [*(VIEW / f"prob_{b}.bw" for b in "ACGT"), VIEW / "entropy.bw", VIEW / "scored.vcf.gz"]
    tracks += [VIEW / "ism.tsv.bgz", VIEW / "regions.bed"]
    site = build_site(tracks, FASTA, parse_locus("20:61001-61110"))
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(view_app(site), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "shot.png"
        try:
            status = open_page(
                f"http://127.0.0.1:{sock.getsockname()[1]}/", screenshot=shot, size=(1100, 620)
            )
        finally:
            server.should_exit = True
            thread.join(timeout=10)
        assert status.ready and not status.errors and not status.offsite, status.raw
        _save_small(shot, IMG / "view.png")
        report = Path(tmp) / "report.html"
        build_report(
            VIEW / "scored.vcf", FASTA, report, tracks=[VIEW / "logprob_ref.bw", VIEW / "entropy.bw"]
        )
        status = open_page(f"{report.as_uri()}#row=3", screenshot=shot, size=(1100, 620))
        assert status.ready and not status.errors and not status.offsite, status.raw
        _save_small(shot, IMG / "report.png")


if __name__ == "__main__":
    main()
