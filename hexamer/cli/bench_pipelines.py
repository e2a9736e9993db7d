"""``hexamer bench vep`` and ``bench embed``: the pipelines against their naive or peer recipes, same run."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from hexamer.cli.app import bench_app, cache_dir
from hexamer.cli.bench_cmd import PLOT_WHY, DtypeOption, JsonOption, LegacyJsonOption, PriceOption
from hexamer.cli.checks import not_stdio


@bench_app.command("vep")
def bench_vep_cmd(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model folder (default: random weights, --shape).")
    ] = None,
    shape: Annotated[
        str, typer.Option(help="Random-weight shape when no --model: tiny, 500m, 3b, 8b.")
    ] = "tiny",
    fasta: Annotated[
        Path | None,
        typer.Option(
            help="Reference FASTA (default: the shipped human chr20 slice).",
            callback=not_stdio("the reference is read by position (indexed), which a pipe cannot do"),
        ),
    ] = None,
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
        typer.Option(
            help="Score this VCF instead of random sites (with --fasta).",
            callback=not_stdio("the VCF is read again in every timed round"),
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
    json_out: JsonOption = None,
    legacy_json: LegacyJsonOption = None,
    price_per_hour: PriceOption = None,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Also draw variants/s per recipe (PNG).", callback=not_stdio(PLOT_WHY)),
    ] = None,
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
    report = run_vep_bench(
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
    from hexamer.cli.bench_cmd import emit

    emit(
        report,
        json_out or legacy_json,
        plot,
        price_per_hour=price_per_hour,
        x="recipe",
        y="variants/s",
        group="method",
    )


def run_vep_bench(
    *,
    model: str | None = None,
    shape: str = "tiny",
    fasta: Path | None = None,
    recipes: tuple[str, ...] = ("window", "next_base"),
    sites: int = 16,
    alts_per_site: int = 3,
    span: int = 12000,
    window: int = 8192,
    window_grid: int = 1,
    vcf: Path | None = None,
    context: int = 6144,
    context_grid: int = 6144,
    rc_average: bool = False,
    dtype: str = "float32",
    repeats: int = 1,
    quick: bool = False,
    published: bool | None = None,
):  # -> BenchReport (imported lazily: the CLI must start fast)
    """One row per (recipe, method); ``quick`` shrinks the workload to seconds on the tiny model.

    Methods: the engine, the naive recipe on hexamer's model (6-mer rows of the head only) and,
    with ``published`` (default: when ``transformers`` is installed), the published scripts' way
    (:mod:`hexamer.bench.baselines.published_vep`: ``transformers``, full-vocabulary logits, one forward per window
    or context). ``× vs engine`` is each method's speed relative to the engine. ``vcf`` scores a
    real variant file (against ``fasta``) instead of ``sites`` random SNVs.
    """
    import importlib.util
    import math
    import time

    from hexamer.bench.common import bench_model_folder
    from hexamer.bench.report import BenchReport
    from hexamer.bench.vep import bench_vep
    from hexamer.carbon import Carbon
    from hexamer.demo import demo_data_files
    from hexamer.testing import SHAPES
    from hexamer.testing.vcf import write_random_vcf
    from hexamer.vep import score_variants

    bad = [r for r in recipes if r not in ("window", "next_base")]
    if not recipes or bad:
        raise typer.BadParameter(
            f"--recipes must be a comma-separated subset of window, next_base; got {bad}"
        )
    if model is None and shape not in SHAPES:
        raise typer.BadParameter(f"--shape must be one of {sorted(SHAPES)}")
    has_transformers = importlib.util.find_spec("transformers") is not None
    if published and not has_transformers:
        raise typer.BadParameter("--published needs transformers (pip install 'hexamer[hf]')")
    if published is None:
        published = has_transformers
    if vcf is not None and fasta is None:
        raise typer.BadParameter("--vcf needs --fasta (the reference its positions refer to)")
    if quick:
        sites, window, context, context_grid, span = min(sites, 6), min(window, 1200), 1200, 1200, 4000
        window_grid = min(window_grid, window // 2)
    folder = model or str(bench_model_folder(shape, cache_dir(), dtype))
    carbon = Carbon.from_pretrained(folder, dtype=dtype)
    scorer = None
    if published:
        from hexamer.bench.baselines.published_vep import PublishedScorer

        scorer = PublishedScorer(folder, dtype=dtype, device=carbon.model.device)
    reference = fasta or next(p for p in demo_data_files() if "chr20" in p.name)
    workload = Path(vcf).name if vcf is not None else f"{sites} sites × {alts_per_site} alts"
    if window_grid > 1:
        workload += f", window grid {window_grid} bp"
    report = BenchReport(
        name="vep",
        title=f"VEP engine vs naive recipe{' and published scripts' if scorer else ''} ({workload}, {Path(folder).name}, {dtype})",
        columns=[
            "recipe",
            "method",
            "variants",
            "seconds",
            "variants/s",
            "speed-up",
            "× vs engine",
            "max abs diff",
        ],
        formats={
            "seconds": "{:.2f}",
            "variants/s": "{:,.1f}",
            "speed-up": "{:.2f}×",
            "× vs engine": "{:.2f}×",
            "max abs diff": "{:.1e}",
        },
    )
    gains: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        if vcf is None:
            vcf = Path(tmp) / "sites.vcf"
            from hexamer.vep.variants import Reference

            with Reference(reference) as ref:
                contig, length = next(iter(ref.lengths.items()))
            write_random_vcf(
                reference,
                vcf,
                n_sites=sites,
                alts_per_site=alts_per_site,
                region=(contig, 0, min(span, length)),
            )
        for recipe in recipes:
            options = (
                {"window": window, "window_grid": window_grid, "rc_average": rc_average}
                if recipe == "window"
                else {"context": context, "context_grid": context_grid}
            )
            b = bench_vep(carbon, vcf, reference, recipe=recipe, repeats=repeats, **options)
            common = {"recipe": recipe, "variants": b.n_variants}
            report.rows.append(
                {
                    **common,
                    "method": "hexamer engine",
                    "seconds": b.engine_s,
                    "variants/s": b.engine_variants_per_s,
                    "speed-up": b.speedup,
                    "× vs engine": 1.0,
                    "max abs diff": b.max_abs_diff,
                }
            )
            report.rows.append(
                {
                    **common,
                    "method": "naive (hexamer model)",
                    "seconds": b.naive_s,
                    "variants/s": b.naive_variants_per_s,
                    "× vs engine": b.engine_s / b.naive_s if b.naive_s else math.inf,
                }
            )
            if scorer is None:
                continue
            rows = score_variants(carbon, vcf, reference, recipe=recipe, on_note=lambda _: None, **options)
            # the published scripts give an indel's windows different lengths (hexamer.bench.baselines.published_vep):
            # compare the equal-length changes only
            engine = {
                (r["record"], r["alt_index"]): r["score"]
                for r in rows
                if r["status"] == "ok" and len(r["ref"]) == len(r["alt"])
            }
            best = math.inf
            scores: dict[tuple[int, int], float] = {}
            for _ in range(repeats):
                t0 = time.perf_counter()
                scores = scorer.scores(vcf, reference, recipe=recipe, **options)
                best = min(best, time.perf_counter() - t0)
            if not engine.keys() <= scores.keys():
                raise RuntimeError(f"engine and published-scripts runs scored different variants ({recipe})")
            scores = {key: scores[key] for key in engine}
            report.rows.append(
                {
                    **common,
                    "variants": len(scores),
                    "method": "transformers (published scripts)",
                    "seconds": best,
                    "variants/s": len(scores) / best if best else math.inf,
                    "× vs engine": b.engine_s / best if best else math.inf,
                    "max abs diff": max((abs(scores[k] - engine[k]) for k in scores), default=0.0),
                }
            )
            gains.append(f"{best / b.engine_s:.1f}× ({recipe})" if b.engine_s else f"∞ ({recipe})")
    report.notes.append(
        "naive (hexamer model) = one full reference and one full alternate forward per variant (one per "
        "context for next_base), computing only the 4,096 6-mer rows of the LM head"
    )
    if scorer is not None:
        report.notes.append(
            "transformers (published scripts) = LlamaForCausalLM(...)(input_ids).logits over the full "
            f"vocabulary ({scorer.model.config.vocab_size:,} ids) at every position, one forward per window "
            "or context, then FNS; max abs diff vs the engine's scores. Engine speed-up over it: "
            + ", ".join(gains)
        )
    elif not has_transformers:
        report.notes.append(
            "transformers is not installed: published-scripts baseline skipped (pip install 'hexamer[hf]')"
        )
    report.notes.append("× vs engine = the method's variants/s relative to the engine's (1.00× = as fast)")
    return report


@bench_app.command("embed")
def bench_embed_cmd(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model folder (default: random weights, --shape).")
    ] = None,
    shape: Annotated[
        str, typer.Option(help="Random-weight shape when no --model: tiny, 500m, 3b, 8b.")
    ] = "tiny",
    n_seqs: Annotated[int, typer.Option("--sequences", min=1, help="Sequences to embed.")] = 64,
    length: Annotated[int, typer.Option(min=6, help="Bases per sequence.")] = 1200,
    batch_size: Annotated[int, typer.Option(min=1)] = 8,
    dtype: DtypeOption = "float32",
    repeats: Annotated[int, typer.Option(min=1, help="Rounds; each backend keeps its best time.")] = 1,
    json_out: JsonOption = None,
    legacy_json: LegacyJsonOption = None,
    price_per_hour: PriceOption = None,
) -> None:
    """Sequences/s of ``hexamer.embed`` (mean pooling, last layer) vs transformers on the same weights."""
    from hexamer.cli.bench_cmd import emit

    report = run_embed_bench(
        model=model,
        shape=shape,
        n_seqs=n_seqs,
        length=length,
        batch_size=batch_size,
        dtype=dtype,
        repeats=repeats,
    )
    emit(report, json_out or legacy_json, None, price_per_hour=price_per_hour)


def run_embed_bench(
    *,
    model: str | None = None,
    shape: str = "tiny",
    n_seqs: int = 64,
    length: int = 1200,
    batch_size: int = 8,
    dtype: str = "float32",
    repeats: int = 1,
    quick: bool = False,
):  # -> BenchReport
    """Mean-pooled final-layer embeddings of random DNA: hexamer vs ``transformers`` (right-padded
    batches, ``last_hidden_state`` averaged over the 6-mer positions); vectors compared."""
    import time

    import numpy as np
    import torch

    from hexamer.bench.common import bench_model_folder
    from hexamer.bench.report import BenchReport
    from hexamer.bench.tokenizer import random_dna
    from hexamer.carbon import Carbon
    from hexamer.embed import embed_sequences
    from hexamer.testing import SHAPES

    if model is None and shape not in SHAPES:
        raise typer.BadParameter(f"--shape must be one of {sorted(SHAPES)}")
    if quick:
        n_seqs, length = min(n_seqs, 8), min(length, 600)
    folder = model or str(bench_model_folder(shape, cache_dir(), dtype))
    carbon = Carbon.from_pretrained(folder, dtype=dtype)
    seqs = [random_dna(length, seed=i) for i in range(n_seqs)]

    def ours() -> np.ndarray:
        items = embed_sequences(carbon, seqs, pool="mean", layer=-1, batch_size=batch_size)
        return np.stack([v for _, v in items])

    rows: list[dict] = []
    results: dict[str, np.ndarray] = {}

    def timed(name: str, fn) -> None:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            results[name] = fn()
            best = min(best, time.perf_counter() - start)
        rows.append({"backend": name, "sequences": n_seqs, "seconds": best, "sequences/s": n_seqs / best})

    timed("hexamer", ours)
    try:
        import transformers
    except ImportError:
        transformers = None
    if transformers is not None:
        transformers.utils.logging.disable_progress_bar()
        hf = transformers.LlamaModel.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
        lay = carbon.layout
        content = [carbon.tokenizer.encode_dna(s, tags=False).tolist() for s in seqs]

        @torch.inference_mode()
        def peer() -> np.ndarray:
            out = []
            for start in range(0, n_seqs, batch_size):
                group = content[start : start + batch_size]
                width = max(len(c) for c in group) + 2
                ids = torch.zeros((len(group), width), dtype=torch.int64)
                mask = torch.zeros((len(group), width), dtype=torch.int64)
                for i, c in enumerate(group):
                    row = [lay.begin_id, *c, lay.end_id]
                    ids[i, : len(row)] = torch.tensor(row)
                    mask[i, : len(row)] = 1
                h = hf(input_ids=ids, attention_mask=mask).last_hidden_state.float()
                for i, c in enumerate(group):
                    out.append(h[i, 1 : 1 + len(c)].mean(0).numpy())
            return np.stack(out)

        timed("transformers", peer)
    base = next((r for r in rows if r["backend"] == "transformers"), None)
    for r in rows:
        r["× transformers"] = base["seconds"] / r["seconds"] if base else None
    if base is not None:
        rows[0]["max abs diff"] = float(np.abs(results["hexamer"] - results["transformers"]).max())
    report = BenchReport(
        name="embed",
        title=f"embeddings, {n_seqs} × {length} bp, mean pool, last layer ({Path(folder).name}, {dtype})",
        columns=["backend", "sequences", "seconds", "sequences/s", "× transformers", "max abs diff"],
        rows=rows,
        formats={
            "seconds": "{:.2f}",
            "sequences/s": "{:,.1f}",
            "× transformers": "{:.2f}×",
            "max abs diff": "{:.1e}",
        },
    )
    if transformers is None:
        report.notes.append("transformers is not installed: peer skipped (pip install 'hexamer[hf]')")
    return report
