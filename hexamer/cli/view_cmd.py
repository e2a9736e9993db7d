"""``hexamer view`` (igv.js over local files) and ``hexamer report`` (a self-contained variant
report); the work is in :mod:`hexamer.view`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hexamer.cli.app import JsonFlag, app, console, err_console, fail, print_json
from hexamer.cli.checks import fasta_option, path_option


@app.command()
def view(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="bigWig/bedGraph tracks, scored VCFs, ISM tables (.tsv.bgz), BED files, or folders of them; a FASTA is the reference."
        ),
    ],
    fasta: Annotated[
        Path | None, fasta_option("Indexed reference FASTA (samtools faidx; bgzip with .gzi).")
    ] = None,
    region: Annotated[str | None, typer.Option(help="Locus shown first, contig:start-end (1-based).")] = None,
    host: Annotated[
        str, typer.Option(help="Interface to bind; the default keeps the page on this machine.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: any free port).")] = 8700,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Do not open a web browser; print the URL.")
    ] = False,
) -> None:
    """Look at hexamer's tracks, scored VCFs and ISM tables in igv.js, offline (docs/view.md)."""
    import uvicorn

    from hexamer.view import ViewError, bind_socket, build_site, parse_locus, view_app

    try:
        locus = parse_locus(region) if region is not None else None
        site = build_site(files, fasta, locus)
        sock = bind_socket(host, port)
    except ViewError as exc:
        fail(exc)
    bound = sock.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"
    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(
            f"[yellow]warning:[/yellow] serving on {host}: anyone who can reach it can read these files"
        )
    console.print(f"hexamer view: {url} ({len(site.files)} files; Ctrl-C stops)", highlight=False)
    if not no_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(view_app(site), log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


@app.command()
def report(
    vcf: Annotated[Path, typer.Argument(help="Scored VCF (hexamer vep's output).")],
    fasta: Annotated[Path, fasta_option("Indexed reference FASTA the VCF was scored on.")],
    out: Annotated[
        Path, path_option("The HTML file to write.", "it is written atomically", "--out", "-o")
    ] = Path("hexamer-report.html"),
    track: Annotated[
        list[Path] | None,
        typer.Option("--track", "-t", help="bigWig of hexamer track to embed around each variant (repeat)."),
    ] = None,
    flank: Annotated[int, typer.Option(min=0, max=5000, help="Bases embedded each side of a variant.")] = 60,
    title: Annotated[str | None, typer.Option(help="Page title (default: the VCF's name).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Write one self-contained HTML page for reviewing scored variants (table + igv.js; no server, no network)."""
    from hexamer.view import ViewError, build_report

    try:
        result = build_report(vcf, fasta, out, tracks=track or (), flank=flank, title=title)
    except ViewError as exc:
        fail(exc)
    summary = {
        "out": str(result.path),
        "records": result.n_records,
        "rows": result.n_rows,
        "bytes": result.n_bytes,
        "tracks": result.tracks,
    }
    if as_json:
        print_json(summary)
        return
    console.print(
        f"wrote {result.path}: {result.n_rows:,} variant alleles of {result.n_records:,} records, "
        f"{result.n_bytes / 2**20:.1f} MiB (open it in a browser; it needs no server)",
        highlight=False,
    )
