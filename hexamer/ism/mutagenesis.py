"""In-silico saturation mutagenesis: every SNV of every base of a region scored by a VEP recipe.

The variants (:mod:`hexamer.ism.variants`) go through the VEP engine itself
(:func:`hexamer.vep.scoring.iter_record_blocks`), so every row has exactly the status, reason and score
``hexamer vep`` gives the same variant with the same settings, and the engine's sharing does the
speed: with the next-base recipe one forward over a context reads the next-base distribution of
every position of it (all three ALTs of a base come from one logit row); with the window recipe the
three ALTs of a base share its reference window and each alt window runs from its first changed
6-mer on (KV-cache prefix reuse). Windows are centred on each variant, as ``hexamer vep`` centres
them, so the same SNV gets the same score from both; ``window_grid=128`` centres them on 128-bp
tiles instead (the SNVs of a tile share one reference window: faster, other numbers, and every
row says ``window_placement = grid:128``).

    from hexamer import Carbon
    from hexamer.ism import saturation_mutagenesis
    rows = saturation_mutagenesis(Carbon.from_pretrained(DIR), "ref.fa.gz", region="chr20:1000-1100")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hexamer.io.reference import Reference
from hexamer.io.vcf.reader import read_vcf
from hexamer.ism.regions import MAX_REGION_BP, Region, RegionError, merge_regions, parse_region
from hexamer.ism.variants import IsmRecord, ism_records
from hexamer.vep.recipes import DEFAULT_CONTEXT, DEFAULT_CONTEXT_GRID, DEFAULT_WINDOW, window_placement
from hexamer.vep.scoring import iter_record_blocks
from hexamer.vep.settings import ROW_COLUMNS, VepSettings

if TYPE_CHECKING:
    from hexamer.calibration.table import Calibration
    from hexamer.carbon import Carbon

__all__ = [
    "ISM_COLUMNS",
    "MAX_FLANK",
    "SiteScan",
    "ism_regions",
    "ism_rows",
    "ism_settings",
    "iter_mutagenesis",
    "placement_of",
    "region_list",
    "saturation_mutagenesis",
    "scan_mutagenesis",
    "site_list",
    "site_mutagenesis",
    "site_regions",
]

PathLike = str | os.PathLike[str]
Row = dict[str, Any]

#: Columns of an ISM row, in output order: those of the VEP engine's row it is made from
#: (:data:`hexamer.vep.ROW_COLUMNS`) but the input record's keys, with ``window_placement`` after
#: ``recipe`` (window recipe: ``centred`` or ``grid:G``, :func:`hexamer.vep.recipes.window_placement`;
#: empty for next_base) and ``phred`` after ``score`` (set when a calibration is given).
ISM_COLUMNS = tuple(
    column
    for name in ROW_COLUMNS
    if name not in ("record", "alt_index", "id")
    for column in {"score": (name, "phred"), "recipe": (name, "window_placement")}.get(name, (name,))
)
#: The most bases on each side of a site in site mode.
MAX_FLANK = 100_000


def ism_settings(
    *,
    recipe: str = "window",
    window: int = DEFAULT_WINDOW,
    window_grid: int = 1,
    context: int = DEFAULT_CONTEXT,
    context_grid: int = DEFAULT_CONTEXT_GRID,
    rc_average: bool = False,
    batch_size: int = 8,
    token_budget: int | None = None,
) -> VepSettings:
    """The :class:`~hexamer.vep.VepSettings` of an ISM run: the defaults of ``hexamer vep`` (windows
    centred on each variant); ``window_grid=128`` shares one reference window per 128-bp tile."""
    return VepSettings(
        recipe=recipe,
        window=window,
        window_grid=window_grid,
        context=context,
        context_grid=context_grid,
        rc_average=rc_average,
        batch_size=batch_size,
        token_budget=token_budget,
    )


def placement_of(settings: VepSettings) -> str | None:
    """The ``window_placement`` of rows scored with ``settings`` (checked ones: fitting a window
    to the model may narrow its grid); None for the next-base recipe, which has no window."""
    return window_placement(settings.window_grid) if settings.recipe == "window" else None


def _skipped(item: IsmRecord, recipe: str, placement: str | None) -> list[Row]:
    rec = item.record
    return [
        _ism_row(
            {"chrom": rec.chrom, "pos": rec.pos, "ref": rec.ref, "alt": alt, "kind": "SNV"},
            recipe,
            placement,
            item.skip,
        )
        for alt in rec.alts
    ]


def _ism_row(row: dict[str, Any], recipe: str, placement: str | None, skip: str | None = None) -> Row:
    out = {c: row.get(c) for c in ISM_COLUMNS}
    out["recipe"] = recipe
    out["window_placement"] = placement
    if skip is not None:
        out.update(status="skipped", reason=skip, score=None)
    return out


def ism_rows(
    items: Iterable[IsmRecord],
    scored: dict[int, list[Row]],
    recipe: str,
    *,
    placement: str | None = None,
    on_skipped: Callable[[int], None] | None = None,
) -> Iterator[list[Row]]:
    """The ISM rows of ``items``, one list per item in item order: a skipped base's rows, else the
    engine rows of its record (``scored``, by record index; taken out of it) by ALT order. Shards
    scored elsewhere merge into the rows one process gives. ``placement`` is the rows'
    ``window_placement`` (:func:`placement_of`); ``on_skipped`` counts skipped rows."""
    for it in items:
        if it.skip is not None:
            batch = _skipped(it, recipe, placement)
            if on_skipped is not None:
                on_skipped(len(batch))
        else:
            engine_rows = sorted(scored.pop(it.record.index), key=lambda r: r["alt_index"])
            batch = [_ism_row(r, recipe, placement) for r in engine_rows]
        yield batch


def iter_mutagenesis(
    carbon: Carbon,
    reference: Reference,
    regions: list[Region],
    settings: VepSettings,
    *,
    indels: bool = False,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    calibration: Calibration | None = None,
) -> Iterator[Row]:
    """ISM rows of ``regions`` (parsed, merged), in position order, one per (base, ALT)."""
    settings = settings.checked(carbon, on_note=on_note)
    if calibration is not None:
        calibration.check(carbon, settings)
    items = list(ism_records(reference, regions, indels=indels))
    records = [it.record for it in items if it.skip is None]
    rows: dict[int, list[Row]] = {}
    for units in iter_record_blocks(
        carbon, records, reference, settings, naive=naive, on_progress=on_progress, on_note=on_note
    ):
        for unit in units:
            for r in unit:
                rows.setdefault(r["record"], []).append(r)
    placement = placement_of(settings)
    for batch in ism_rows(items, rows, settings.recipe, placement=placement, on_skipped=on_progress):
        yield from batch if calibration is None else calibration.annotate(batch)


def region_list(region: str | Region | Iterable[str | Region], reference: Reference) -> list[Region]:
    """``region`` (one ``chr:start-end`` or :class:`Region`, or several) parsed against
    ``reference`` and merged, in FASTA order; :class:`RegionError` for a bad or missing one."""
    wanted = [region] if isinstance(region, str | Region) else list(region)
    if not wanted:
        raise RegionError("no region given")
    parsed = [r if isinstance(r, Region) else parse_region(r, reference) for r in wanted]
    return merge_regions(parsed, reference.order)


def _open(fasta: PathLike | Reference) -> tuple[Reference, bool]:
    if isinstance(fasta, Reference):
        return fasta, False
    return Reference(fasta), True


def saturation_mutagenesis(
    carbon: Carbon,
    fasta: PathLike | Reference,
    *,
    region: str | Region | Iterable[str | Region],
    recipe: str = "window",
    window: int = DEFAULT_WINDOW,
    window_grid: int = 1,
    context: int = DEFAULT_CONTEXT,
    context_grid: int = DEFAULT_CONTEXT_GRID,
    rc_average: bool = False,
    indels: bool = False,
    batch_size: int = 8,
    token_budget: int | None = None,
    naive: bool = False,
    calibration: Calibration | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[Row]:
    """Score all three SNVs of every base of ``region`` (``chr:start-end``, 1-based inclusive, or
    several), and with ``indels`` every 1-bp deletion and insertion, with a VEP recipe.

    Returns rows with the columns :data:`ISM_COLUMNS` sorted by position, one per variant:
    ``score`` is the recipe's (window: ``LL(alt) - LL(ref)``, next_base: ``log P(ref) - log
    P(alt)``), equal to :func:`hexamer.vep.score_variants` on the same variants with the same
    settings (:func:`ism_settings`: windows centred on each variant, as ``hexamer vep`` centres
    them; ``window_grid=128`` shares one reference window per 128-bp tile, ``window_placement``
    says which); ``status``/``reason`` as ``hexamer vep`` gives them (an ``N`` base is ``skipped``).
    ``calibration`` (:class:`hexamer.calibration.Calibration`, checked against the model and
    settings first) fills ``phred``. A bad region raises :class:`~hexamer.ism.regions.RegionError`
    before any scoring.
    """
    settings = ism_settings(
        recipe=recipe,
        window=window,
        window_grid=window_grid,
        context=context,
        context_grid=context_grid,
        rc_average=rc_average,
        batch_size=batch_size,
        token_budget=token_budget,
    )
    scan = scan_mutagenesis(
        carbon,
        fasta,
        settings,
        region=region,
        indels=indels,
        naive=naive,
        calibration=calibration,
        on_progress=on_progress,
        on_note=on_note,
    )
    return scan.rows


@dataclass
class SiteScan:
    """An ISM run (:func:`scan_mutagenesis`): the rows, the merged regions scored, and around the
    sites of a VCF the sites that could not be placed on the FASTA (``(record, chrom, pos,
    reason)``: unknown contig, bad line)."""

    rows: list[Row]
    regions: list[Region]
    unplaced: list[tuple[int, str, int, str]] = field(default_factory=list)


def site_regions(
    vcf: PathLike, reference: Reference, flank: int
) -> tuple[list[Region], list[tuple[int, str, int, str]]]:
    """``[pos - flank, pos + flank]`` around each VCF record (clipped to its contig), merged; and
    the records that name no FASTA contig or position."""
    if not 0 <= flank <= MAX_FLANK:
        raise ValueError(f"flank must be between 0 and {MAX_FLANK:,} bp, got {flank}")
    regions: list[Region] = []
    unplaced: list[tuple[int, str, int, str]] = []
    for rec in read_vcf(vcf):
        if rec.problem is not None:
            unplaced.append((rec.index, rec.chrom, rec.pos, rec.problem))
            continue
        contig, message = reference.resolve(rec.chrom)
        if contig is None:
            unplaced.append((rec.index, rec.chrom, rec.pos, message or "contig not in the FASTA"))
            continue
        length = reference.lengths[contig]
        if not 1 <= rec.pos <= length:
            unplaced.append(
                (rec.index, rec.chrom, rec.pos, f"POS {rec.pos} is outside contig {contig!r} ({length:,} bp)")
            )
            continue
        start, end = max(0, rec.pos - 1 - flank), min(length, rec.pos + flank)
        regions.append(Region(rec.chrom, contig, start, end))
    return merge_regions(regions, reference.order), unplaced


def site_list(
    vcf: PathLike, reference: Reference, flank: int, *, on_note: Callable[[str], None] | None = None
) -> tuple[list[Region], list[tuple[int, str, int, str]]]:
    """:func:`site_regions`, each unplaced site passed to ``on_note``; :class:`RegionError` when the
    flanks cover more than :data:`~hexamer.ism.regions.MAX_REGION_BP` bases."""
    regions, unplaced = site_regions(vcf, reference, flank)
    for index, chrom, pos, reason in unplaced:
        if on_note is not None:
            on_note(f"site {index + 1} ({chrom}:{pos}) not scored: {reason}")
    if sum(r.length for r in regions) > MAX_REGION_BP:
        raise RegionError(
            f"the sites' flanks cover {sum(r.length for r in regions):,} bp, more than {MAX_REGION_BP:,}: "
            "use fewer sites or a smaller --flank"
        )
    return regions, unplaced


def site_mutagenesis(
    carbon: Carbon,
    fasta: PathLike | Reference,
    vcf: PathLike,
    *,
    flank: int = 50,
    indels: bool = False,
    calibration: Calibration | None = None,
    naive: bool = False,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    **settings: Any,
) -> SiteScan:
    """ISM of ``flank`` bases on each side of every site of ``vcf`` (overlapping windows merged,
    so every base is scored once). ``settings`` as for :func:`saturation_mutagenesis`. A site
    that cannot be placed is listed in :attr:`SiteScan.unplaced` (and passed to ``on_note``)."""
    return scan_mutagenesis(
        carbon,
        fasta,
        ism_settings(**settings),
        vcf=vcf,
        flank=flank,
        indels=indels,
        naive=naive,
        calibration=calibration,
        on_progress=on_progress,
        on_note=on_note,
    )


def ism_regions(
    reference: Reference,
    *,
    region: str | Region | Iterable[str | Region] | None = None,
    vcf: PathLike | None = None,
    flank: int = 50,
    on_note: Callable[[str], None] | None = None,
) -> tuple[list[Region], list[tuple[int, str, int, str]]]:
    """The merged regions of an ISM run, ``region`` (:func:`region_list`) or ``flank`` bases
    around each site of ``vcf`` (:func:`site_list`), exactly one of them; and the sites that
    could not be placed (none for ``region``)."""
    if (region is None) == (vcf is None):
        raise ValueError("give region (one or more) or vcf with flank, not both")
    if vcf is not None:
        return site_list(vcf, reference, flank, on_note=on_note)
    assert region is not None
    return region_list(region, reference), []


def scan_mutagenesis(
    carbon: Carbon,
    fasta: PathLike | Reference,
    settings: VepSettings,
    *,
    region: str | Region | Iterable[str | Region] | None = None,
    vcf: PathLike | None = None,
    flank: int = 50,
    indels: bool = False,
    naive: bool = False,
    calibration: Calibration | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> SiteScan:
    """ISM of ``region`` or around the sites of ``vcf`` (:func:`ism_regions`) with ``settings``
    (a :class:`~hexamer.vep.VepSettings`, e.g. :func:`ism_settings`): what
    :func:`saturation_mutagenesis` and :func:`site_mutagenesis` run. A bad region raises
    :class:`~hexamer.ism.regions.RegionError` before any scoring."""
    reference, owned = _open(fasta)
    try:
        regions, unplaced = ism_regions(reference, region=region, vcf=vcf, flank=flank, on_note=on_note)
        rows = iter_mutagenesis(
            carbon,
            reference,
            regions,
            settings,
            indels=indels,
            naive=naive,
            on_progress=on_progress,
            on_note=on_note,
            calibration=calibration,
        )
        return SiteScan(list(rows), regions, unplaced)
    finally:
        if owned:
            reference.close()
