"""``hexamer bench spec``: target alone vs speculative decoding with a draft, same prompts, same run."""

from __future__ import annotations

from typing import Annotated

import typer

from hexamer.cli.app import bench_app
from hexamer.cli.bench_cmd import _log, parse_floats, parse_ints, parse_names
from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output


@bench_app.command("spec")
@bench_output("Also draw the speed-ups (PNG).")
def bench_spec_cmd(
    target: Annotated[
        str | None, typer.Option("--target", help="Target model folder (default: synthetic pairs).")
    ] = None,
    draft: Annotated[
        str | None, typer.Option("--draft", help="Draft model folder (same tokenizer as --target).")
    ] = None,
    noises: Annotated[
        str | None,
        typer.Option(help="Synthetic pairs: comma-separated noise levels of the target's extra layers."),
    ] = None,
    modes: Annotated[str, typer.Option(help="Comma-separated: token, bp.")] = "token,bp",
    decodings: Annotated[str, typer.Option(help="Comma-separated: greedy, sampled.")] = "greedy,sampled",
    prompt_bp: Annotated[int | None, typer.Option(min=6, help="Prompt length (bp).")] = None,
    new_bp: Annotated[int | None, typer.Option(min=1, help="New bases per prompt.")] = None,
    batch_sizes: Annotated[
        str, typer.Option(help="Comma-separated batch sizes (prompts decoded together).")
    ] = "1",
    legacy_batch: Annotated[int | None, typer.Option("--batch", min=1, hidden=True)] = None,
    spec_k: Annotated[
        str, typer.Option("--spec-k", help="Drafted 6-mers per round: a number or auto.")
    ] = "auto",
    temperature: Annotated[float, typer.Option(min=0.0, help="Temperature of the sampled runs.")] = 1.0,
    repeats: Annotated[
        int | None, typer.Option(min=1, help="Timed rounds per case after a warm-up (at least 3; medians).")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick/--no-quick", help="A seconds-long run on small models.")
    ] = False,
    output: BenchOutput = SCREEN_ONLY,
) -> None:
    """Speed-up of speculative decoding over the target alone (greedy output checked identical)."""
    from hexamer.bench.run_all import EXTERNAL_PLOTS
    from hexamer.bench.spec import run_spec_bench
    from hexamer.engine.spec_config import SpecConfig

    if (target is None) != (draft is None):
        raise typer.BadParameter("give both --target and --draft, or neither (synthetic pairs)")
    try:
        SpecConfig.from_option(spec_k)  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(f"--spec-k: {exc}") from exc
    sizes = (legacy_batch,) if legacy_batch is not None else parse_ints(batch_sizes, "--batch-sizes")
    modes_t = parse_names(modes, "--modes", sorted({"token", "bp"}))
    decodings_t = parse_names(decodings, "--decodings", sorted({"greedy", "sampled"}))
    noise_t = parse_floats(noises, "--noises") if noises is not None else None
    report = None
    for batch in sizes:
        part = run_spec_bench(
            quick=quick,
            log=_log,
            target=target,
            draft=draft,
            noises=noise_t,
            modes=modes_t,
            decodings=decodings_t,
            prompt_bp=prompt_bp,
            new_bp=new_bp,
            batch=batch,
            num_speculative=spec_k if spec_k == "auto" else int(spec_k),
            temperature=temperature,
            repeats=repeats,
        )
        for row in part.rows:
            row["batch"] = batch
        if report is None:
            report = part
            report.columns = ["batch", *report.columns]
        else:
            report.rows.extend(part.rows)
            report.notes.extend(n for n in part.notes if n not in report.notes)
    assert report is not None
    if len(sizes) > 1:
        report.title = report.title.replace(f"batch {sizes[0]},", f"batch {', '.join(map(str, sizes))},")
    output.emit(report, **EXTERNAL_PLOTS["spec"])
