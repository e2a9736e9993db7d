"""``hexamer ism`` and ``hexamer calibrate``: thin layers over :mod:`hexamer.ism` and :mod:`hexamer.calibration`."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from hexamer.cli import server_options as served
from hexamer.cli.app import (
    CpuThreadsOption,
    DTypeOption,
    JsonFlag,
    app,
    console,
    err_console,
    fail,
    print_json,
    resolve_model,
)
from hexamer.cli.checks import (
    MAX_BATCH_SIZE,
    MAX_TOKEN_BUDGET,
    check_output,
    check_plot_path,
    check_runtime,
    check_vep_settings,
    fasta_option,
)
from hexamer.cli.option_groups import FILLED, option_group
from hexamer.cli.ray_options import RayRun, check_resume, ray_options
from hexamer.cli.scaleout import ResumeOption
from hexamer.cli.sequence_jobs import job_progress, load_calibration, set_threads

if TYPE_CHECKING:
    from hexamer.vep import VepSettings

RecipeOption = Annotated[
    Literal["window", "next_base"],
    typer.Option(help="window: LL(alt) - LL(ref); next_base: log P(ref) - log P(alt)."),
]
WindowOption = Annotated[
    int, typer.Option(max=1_000_000, help="Window recipe: bp around the variant's tile (at least 30).")
]
WindowGridOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=500_000,
        help="Window recipe: 1 = windows centred on each variant (as hexamer vep; the published recipe); G = "
        "centred on G-bp tiles, so the SNVs of a tile share one reference forward (faster, other numbers; "
        "rows say window_placement=grid:G). At most half the window.",
    ),
]
ContextOption = Annotated[
    int, typer.Option(max=10_000_000, help="Next-base recipe: left context in bp (at least 12).")
]
ContextGridOption = Annotated[
    int,
    typer.Option(min=1, max=10_000_000, help="Next-base: contexts start on this grid (6 = fixed length)."),
]
RcOption = Annotated[
    bool, typer.Option("--rc-average/--no-rc-average", help="Window: average with the reverse complement.")
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Model folder or hub id.")]
FastaOption = Annotated[Path, fasta_option()]
BatchOption = Annotated[int, typer.Option(min=1, max=MAX_BATCH_SIZE, help="Rows per forward.")]
BudgetOption = Annotated[
    int | None, typer.Option(min=1, max=MAX_TOKEN_BUDGET, help="Most padded tokens per forward.")
]
DeviceOption = Annotated[str | None, typer.Option(help="cpu, cuda, ... (default: cuda when present).")]


def _recipe_settings(batch_size: int = 8, token_budget: int | None = None, **options: Any) -> VepSettings:
    from hexamer.ism import ism_settings

    settings = check_vep_settings(ism_settings(**options))  # before the model loads
    return replace(settings, batch_size=batch_size, token_budget=token_budget)


#: The window and context options of ``ism``, ``calibrate`` and ``bench ism``.
_WINDOW_OPTIONS = (
    ("window", WindowOption, 8192),
    ("window_grid", WindowGridOption, 1),
    ("rc_average", RcOption, False),
    ("context", ContextOption, 24576),
    ("context_grid", ContextGridOption, 6144),
)
#: The recipe options of ``ism`` and ``calibrate``, with ``--batch-size`` and ``--token-budget``,
#: handed to the command as one ``settings`` (:func:`hexamer.ism.ism_settings`).
recipe_options = option_group(
    "settings",
    (
        ("recipe", RecipeOption, "window"),
        *_WINDOW_OPTIONS,
        ("batch_size", BatchOption, 8),
        ("token_budget", BudgetOption, None),
    ),
    _recipe_settings,
)


def _window_options(**options: Any) -> dict[str, Any]:
    _recipe_settings(**options)  # the same ranges as ism's, before any model loads
    return options


#: ``bench ism`` times both recipes: its window and context options, handed to it as one dict
window_options = option_group("options", _WINDOW_OPTIONS, _window_options)


@app.command()
@served.server_options
@recipe_options
@ray_options(
    Annotated[
        int | None,
        typer.Option(
            min=1,
            max=10_000_000,
            help="--ray: scored records per shard, a multiple of 50,000 (default 50,000).",
        ),
    ]
)
def ism(
    command: typer.Context,
    fasta: FastaOption,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help=".parquet, .tsv, .csv, .jsonl, or .tsv.bgz (bgzip + tabix, CADD layout)."
        ),
    ],
    region: Annotated[
        list[str] | None,
        typer.Option("--region", "-r", help="chr:start-end (1-based, inclusive); repeat for several."),
    ] = None,
    vcf: Annotated[
        Path | None, typer.Option("--vcf", help="ISM around each site of this VCF (with --flank).")
    ] = None,
    flank: Annotated[int, typer.Option(min=0, max=100_000, help="--vcf: bases on each side of a site.")] = 50,
    model: ModelOpt = None,
    settings: VepSettings = FILLED,  # the recipe options (recipe_options)
    indels: Annotated[
        bool,
        typer.Option("--indels/--no-indels", help="Also every 1-bp deletion and insertion (window recipe)."),
    ] = False,
    calibration: Annotated[
        Path | None, typer.Option("--calibration", help="Fill PHRED from this `hexamer calibrate` file.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Heat-map, base x position (.png/.svg/.pdf).")
    ] = None,
    logo: Annotated[
        Path | None, typer.Option("--logo", help="Sequence-logo style per-base importance (.png/.svg/.pdf).")
    ] = None,
    dtype: DTypeOption = "auto",
    device: DeviceOption = None,
    threads: CpuThreadsOption = None,
    ray: RayRun | None = None,  # the --ray options (ray_options)
    resume: ResumeOption = False,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """In-silico saturation mutagenesis: all 3 SNVs of every base of a region (or around VCF sites)."""
    from hexamer.calibration import CalibrationError
    from hexamer.ism import RegionError, write_ism
    from hexamer.ism.mutagenesis import scan_mutagenesis
    from hexamer.vep import FastaError, VcfInputError

    served.check_server_choice(server, model, ray, command)
    # under --ray the device and threads are the workers', checked on their machines
    check_runtime(dtype=dtype, device=None if ray else device, threads=None if ray else threads)
    check_resume(resume, ray)
    _check_ism_inputs(fasta, out, region, vcf, plot, logo, indels and settings.recipe == "next_base")
    on_ray = None
    if ray is not None:
        from hexamer.cli.scaleout import ray_ism_runner

        on_ray = ray_ism_runner(ray.pool(threads=threads, dtype=dtype, device=device), ray.shard_records)
    else:
        set_threads(threads)
    cal = load_calibration(calibration)
    carbon = (
        resolve_model(model)  # --ray: each actor loads it
        if on_ray is not None
        else served.open_model(server, model, dtype, device, settings.batch_size, command)
    )  # no KV sharing on a server: each window is scored on its own
    where = {"vcf": vcf, "flank": flank} if vcf is not None else {"region": region}
    try:
        with job_progress("scoring variants", None, digits=1) as bar:
            tick = functools.partial(bar.tick, unit="variants")
            common = {"indels": indels, "calibration": cal, "on_note": _note, "on_progress": tick, **where}
            if on_ray is not None:  # the actors score, the driver writes the file
                scan = on_ray(carbon, fasta, out, resume=resume, settings=settings, **common)
            else:
                scan = scan_mutagenesis(carbon, fasta, settings, **common)
        rows, unplaced = scan.rows, scan.unplaced
        regions = [str(r) for r in scan.regions] if vcf is not None else list(region or [])
        n_written = scan.n_written if on_ray is not None else write_ism(out, rows)
    except (RegionError, CalibrationError, FastaError, VcfInputError, FileNotFoundError, ValueError) as exc:
        fail(exc)
    _report_ism(rows, unplaced, regions, n_written, out, plot, logo, as_json)


def _note(message: str) -> None:
    err_console.print(f"[yellow]{message}[/yellow]")


def _check_ism_inputs(
    fasta: Path,
    out: Path,
    region: list[str] | None,
    vcf: Path | None,
    plot: Path | None,
    logo: Path | None,
    snv_only_indels: bool,
) -> None:
    """Where ``ism`` looks (regions or VCF sites, not both) and the files it reads and writes,
    before any model loads; a note when ``--indels`` meets the SNV-only next_base recipe."""
    from hexamer.ism import output_format

    if (region is None) == (vcf is None):
        raise typer.BadParameter("give --region (one or more) or --vcf with --flank, not both")
    if vcf is not None and not vcf.is_file():
        raise typer.BadParameter(f"{str(vcf)!r} is not a file", param_hint="'--vcf'")
    if not fasta.is_file():
        raise typer.BadParameter(f"{str(fasta)!r} is not a file", param_hint="'--fasta'")
    check_output("--out", out, output_format)
    check_plot_path(plot)
    check_plot_path(logo, "--logo")
    if snv_only_indels:
        _note("--indels: the next_base recipe scores SNVs only; indel rows will be skipped")


def _report_ism(
    rows: list[dict[str, Any]],
    unplaced: list[Any],
    regions: list[str],
    n_written: int,
    out: Path,
    plot: Path | None,
    logo: Path | None,
    as_json: bool,
) -> None:
    """The heat-map and logo (when something was scored), the summary (``--json``: one object),
    and exit status 1 when no variant was scored."""
    from hexamer.ism import output_format, plot_heatmap, plot_logo
    from hexamer.vep.summary import status_summary

    counts = dict(Counter(r["status"] for r in rows))
    summary = {
        "output": str(out),
        "format": output_format(out),
        "n_rows": len(rows),
        "n_written": n_written,
        "status_counts": counts,
        "regions": regions,
        "unplaced_sites": [list(u) for u in unplaced],
        "plot": None,
        "logo": None,
    }
    scored = [r for r in rows if r["status"] == "ok"]
    for path, draw, key in ((plot, plot_heatmap, "plot"), (logo, plot_logo, "logo")):
        if path is None:
            continue
        if not scored:
            err_console.print(f"[yellow]no variant was scored: no {key} drawn[/yellow]")
            continue
        draw(path, rows)
        summary[key] = str(path)
    if as_json:
        print_json(summary)
    else:
        what = "score lines" if summary["format"] == "cadd" else "rows"
        console.print(f"wrote {out} ({n_written:,} {what}; {status_summary(counts)})")
        for key in ("plot", "logo"):
            if summary[key]:
                console.print(f"wrote {summary[key]}")
    if not scored:
        fail("no variant was scored; the reasons are in the output", code=1)


@app.command()
@recipe_options
@served.server_options
def calibrate(
    command: typer.Context,
    fasta: FastaOption,
    out: Annotated[Path, typer.Option("--out", "-o", help="Calibration file to write (.json).")],
    model: ModelOpt = None,
    settings: VepSettings = FILLED,  # the recipe options (recipe_options)
    regions: Annotated[
        int, typer.Option("--regions", min=1, max=10_000, help="Background regions to sample.")
    ] = 20,
    region_bp: Annotated[int, typer.Option(min=1, max=100_000, help="Bases per background region.")] = 100,
    seed: Annotated[int, typer.Option(min=0, max=2**32 - 1, help="Seed of the region sampling.")] = 0,
    dtype: DTypeOption = "auto",
    device: DeviceOption = None,
    threads: CpuThreadsOption = None,
    server: served.Server | None = None,  # the --server options (server_options)
    as_json: JsonFlag = False,
) -> None:
    """Calibrate raw scores to PHRED (higher = more deleterious) against all SNVs of sampled regions.

    With --server the table is made for that served model (its fingerprint: URL, model, top N):
    use it with `vep --server` / `ism --server` on the same server."""
    from hexamer.calibration import CalibrationError
    from hexamer.calibration import calibrate as run_calibration
    from hexamer.vep import FastaError

    served.check_server_choice(server, model, command=command)
    check_runtime(dtype=dtype, device=device, threads=threads)
    if not fasta.is_file():
        raise typer.BadParameter(f"{str(fasta)!r} is not a file", param_hint="'--fasta'")
    if out.suffix.lower() != ".json":
        raise typer.BadParameter(f"--out must end in .json, got {out.name!r}")
    if not out.parent.is_dir():
        raise typer.BadParameter(f"--out folder {str(out.parent)!r} does not exist")
    set_threads(threads)
    carbon = served.open_model(server, model, dtype, device, settings.batch_size, command)
    try:
        cal = run_calibration(
            carbon,
            fasta,
            settings,
            n_regions=regions,
            region_bp=region_bp,
            seed=seed,
            on_note=lambda m: err_console.print(f"[yellow]{m}[/yellow]"),
        )
        cal.save(out)
    except (CalibrationError, FastaError, ValueError) as exc:
        fail(exc)
    summary = {
        "output": str(out),
        "model": cal.model,
        "settings": cal.settings,
        "n_scores": cal.n_scores,
        "max_phred": cal.phreds[-1],
        "seed": seed,
    }
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {out} ({cal.n_scores:,} background SNV scores of {regions} regions; PHRED up to {cal.phreds[-1]:.1f})"
        )
