"""In-silico saturation mutagenesis (ISM): every SNV of every base of a region, scored by a VEP recipe.

* :mod:`~hexamer.ism.regions`: ``chr:start-end`` regions checked against a FASTA;
* :mod:`~hexamer.ism.variants`: the variants of a region (3 SNVs per base, optional 1-bp indels);
* :mod:`~hexamer.ism.mutagenesis`: :func:`saturation_mutagenesis` and :func:`site_mutagenesis`
  (:func:`scan_mutagenesis` takes a ready :class:`~hexamer.vep.VepSettings`), scored by the VEP
  engine (same numbers as :func:`hexamer.vep.score_variants`);
* :mod:`~hexamer.ism.tables`: Parquet/TSV and the bgzip + tabix TSV in CADD layout;
* :mod:`~hexamer.ism.plots`: heat-map and sequence-logo style figures.

    from hexamer import Carbon
    from hexamer.ism import saturation_mutagenesis, write_ism, plot_heatmap
    rows = saturation_mutagenesis(Carbon.from_pretrained(DIR), "ref.fa.gz", region="chr20:1001-1100")
    write_ism("ism.tsv.bgz", rows)
    plot_heatmap("ism.png", rows)

Its benchmark is :mod:`hexamer.bench.ism`; raw scores become PHRED-like with :mod:`hexamer.calibration`.
"""

from hexamer.ism.mutagenesis import (
    ISM_COLUMNS,
    MAX_FLANK,
    SiteScan,
    ism_settings,
    saturation_mutagenesis,
    scan_mutagenesis,
    site_mutagenesis,
)
from hexamer.ism.plots import plot_heatmap, plot_logo
from hexamer.ism.regions import MAX_REGION_BP, Region, RegionError, parse_region
from hexamer.ism.tables import CADD_COLUMNS, output_format, write_cadd_tsv, write_ism

__all__ = [
    "CADD_COLUMNS",
    "ISM_COLUMNS",
    "MAX_FLANK",
    "MAX_REGION_BP",
    "Region",
    "RegionError",
    "SiteScan",
    "ism_settings",
    "output_format",
    "parse_region",
    "plot_heatmap",
    "plot_logo",
    "saturation_mutagenesis",
    "scan_mutagenesis",
    "site_mutagenesis",
    "write_cadd_tsv",
    "write_ism",
]
