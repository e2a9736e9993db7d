"""Look at hexamer's results in igv.js, offline: ``hexamer view`` (a local page over the files
given, with HTTP Range) and ``hexamer report`` (one self-contained HTML file of scored variants).
igv.js is shipped in ``hexamer/data/igv`` (version, licence and provenance beside it)."""

from hexamer.view.files import Locus, ViewError, ViewFile, classify, parse_locus
from hexamer.view.report import ReportResult, build_report
from hexamer.view.serving import ViewSite, bind_socket, build_site, view_app

__all__ = [
    "Locus",
    "ReportResult",
    "ViewError",
    "ViewFile",
    "ViewSite",
    "bind_socket",
    "build_report",
    "build_site",
    "classify",
    "parse_locus",
    "view_app",
]
