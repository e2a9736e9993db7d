"""``hexamer bench vep``, ``bench embed`` and ``bench ism``: options parsed here, the runs in
:mod:`hexamer.bench.vep`, :mod:`hexamer.bench.embed` and :mod:`hexamer.bench.ism` (the pipelines
against their naive, published or peer recipes, same run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hexamer.cli.app import bench_app, fail
from hexamer.cli.bench_cmd import BenchModelOption, DtypeOption, FastaOption, bench_folder, parse_names
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output
from hexamer.cli.checks import check_vep_settings, path_option
from hexamer.cli.ism_cmd import window_options
from hexamer.cli.option_groups import FILLED

if TYPE_CHECKING:
    from hexamer.bench.report import BenchReport

#: checked by the benchmark itself (a usage error naming the shapes it knows)
ShapeName = Annotated[str, typer.Option(help="Random-weight shape when no --model: tiny, 500m, 3b, 8b.")]


def _run(bench: Callable[..., BenchReport], **options: Any) -> BenchReport:
    """``bench(**options)``, its option errors as usage errors."""
    from hexamer.bench.common import BenchOptionError

    try:
        return bench(**options)
    except BenchOptionError as exc:
        raise typer.BadParameter(str(exc)) from exc


@bench_app.command("vep")
@bench_output("Also draw variants/s per recipe (PNG).")
def bench_vep_cmd(
    model: BenchModelOption = None,
    shape: ShapeName = "tiny",
    fasta: FastaOption = None,
    recipes: Annotated[str, typer.Option(help="Comma-separated: window, next_base.")] = "window,next_base",
    sites: Annotated[int, typer.Option(min=1, help="Random SNV sites.")] = 16,
    alts_per_site: Annotated[int, typer.Option(min=1, max=3, help="ALT alleles per site.")] = 3,
    span: Annotated[
        int, typer.Option(min=1000, help="Sites are drawn from the first SPAN bp of the contig.")
    ] = 12000,
    window: Annotated[int, typer.Option(help="Window recipe: bp centred on the variant.")] = 8192,
    window_grid: Annotated[
        int, typer.Option(min=1, help="Window recipe: centre windows on tiles of this many bp (1 = off).")
    ] = 1,
    vcf: Annotated[
        Path | None,
        path_option(
            "Score this VCF instead of random sites (with --fasta).",
            "the VCF is read again in every timed round",
        ),
    ] = None,
    context: Annotated[int, typer.Option(help="Next-base recipe: left context in bp.")] = 6144,
    context_grid: Annotated[int, typer.Option(help="Next-base: contexts start on this grid.")] = 6144,
    rc_average: Annotated[
        bool,
        typer.Option("--rc-average/--no-rc-average", help="Window: average with the reverse complement."),
    ] = False,
    dtype: DtypeOption = "float32",
    repeats: Annotated[int, typer.Option(min=1, help="Rounds; each side keeps its best time.")] = 1,
    output: BenchOutput = SCREEN_ONLY,
    quick: Annotated[
        bool, typer.Option("--quick/--no-quick", help="A seconds-long run (small windows, 6 sites).")
    ] = False,
    published: Annotated[
        bool | None,
        typer.Option(
            "--published/--no-published",
            help="Also time the published scripts' way (transformers, full-vocab logits); "
            "default: on when transformers is installed.",
        ),
    ] = None,
) -> None:
    """Variants/s of the engine (shared windows, KV-cache reuse) vs one ref + one alt forward per variant,
    and vs the published scripts (transformers, full-vocabulary logits)."""
    from hexamer.bench.vep import run_vep_bench
    from hexamer.vep import VepSettings

    # the ranges of hexamer vep, before any model loads
    check_vep_settings(
        VepSettings(
            window=window,
            window_grid=window_grid,
            context=context,
            context_grid=context_grid,
            rc_average=rc_average,
        )
    )
    report = _run(
        run_vep_bench,
        model=model,
        shape=shape,
        fasta=fasta,
        recipes=tuple(r.strip() for r in recipes.split(",") if r.strip()),
        sites=sites,
        alts_per_site=alts_per_site,
        span=span,
        window=window,
        window_grid=window_grid,
        vcf=vcf,
        context=context,
        context_grid=context_grid,
        rc_average=rc_average,
        dtype=dtype,
        repeats=repeats,
        quick=quick,
        published=published,
    )
    output.emit(report, x="recipe", y="variants/s", group="method")


@bench_app.command("embed")
@bench_output(plot=None)
def bench_embed_cmd(
    model: BenchModelOption = None,
    shape: ShapeName = "tiny",
    n_seqs: Annotated[int, typer.Option("--sequences", min=1, help="Sequences to embed.")] = 64,
    length: Annotated[int, typer.Option(min=6, help="Bases per sequence.")] = 1200,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    dtype: DtypeOption = "float32",
    repeats: Annotated[int, typer.Option(min=1, help="Rounds; each backend keeps its best time.")] = 1,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Sequences/s of ``hexamer.embed`` (mean pooling, last layer) vs transformers on the same weights."""
    from hexamer.bench.embed import run_embed_bench

    report = _run(
        run_embed_bench,
        model=model,
        shape=shape,
        n_seqs=n_seqs,
        length=length,
        batch_size=batch_size,
        dtype=dtype,
        repeats=repeats,
    )
    output.emit(report)


@bench_app.command("ism")
@window_options
@bench_output(plot=None, legacy_json=False)
def bench_ism_cmd(
    model: BenchModelOption = None,
    shape: ShapeName = "tiny",
    fasta: FastaOption = None,
    region: Annotated[
        str | None,
        typer.Option("--region", "-r", help="Region (default: 200 bp of the shipped chr20 slice)."),
    ] = None,
    recipes: Annotated[str, typer.Option(help="Comma-separated: window, next_base.")] = "window,next_base",
    options: dict[str, Any] = FILLED,  # the window and context options (window_options)
    dtype: DtypeOption = "float32",
    repeats: Annotated[int, typer.Option(min=1, max=100, help="Rounds; each side keeps its best time.")] = 1,
    output: BenchOutput = SCREEN_ONLY,
    quick: Annotated[
        bool, typer.Option("--quick/--no-quick", help="Seconds: 30 bp, 1,200 bp windows and contexts.")
    ] = False,
    published_sample: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=1_000_000,
            help="The published recipe scores this many of the SNVs (seeded sample), its time scaled to all.",
        ),
    ] = None,
) -> None:
    """ISM of a region vs scoring the same SNVs one by one with the published recipe (same scores, speed-up)."""
    import importlib.util

    from hexamer.bench.ism import run_ism_bench
    from hexamer.ism import RegionError
    from hexamer.vep import FastaError

    chosen = parse_names(recipes, "--recipes", ("window", "next_base"))
    if importlib.util.find_spec("transformers") is None:
        fail(
            "bench ism compares with the published recipe, which needs transformers (pip install 'hexamer[hf]')"
        )
    if fasta is None:
        from hexamer.demo import demo_data_files

        fasta = next(p for p in demo_data_files() if p.name == "human_chr20.fa.gz")
        region = region or ("human_chr20:50001-50030" if quick else "human_chr20:50001-50200")
    elif region is None:
        raise typer.BadParameter("--fasta needs --region")
    if quick:
        options.update({name: min(options[name], 1200) for name in ("window", "context", "context_grid")})
    folder = bench_folder(model, shape, dtype)
    try:
        report = run_ism_bench(
            folder=folder,
            fasta=fasta,
            region=region,
            recipes=chosen,
            dtype=dtype,
            repeats=repeats,
            published_sample=published_sample,
            **options,
        )
    except (FastaError, RegionError) as exc:
        fail(exc)
    output.emit(report)
