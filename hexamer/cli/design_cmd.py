"""``hexamer design``: sequences that meet hard constraints, decoded by the model base by base;
a thin layer over :func:`hexamer.design.design` (docs/design.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from hexamer.cli.app import DTypeOption, JsonFlag, app, console, fail, print_json
from hexamer.cli.sequence_jobs import load_carbon, progress_bar


def _range(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return float(lo), float(hi)
    except ValueError:
        fail(f"--gc must be MIN:MAX fractions such as 0.4:0.6, got {text!r}")


def _motif(text: str) -> tuple[int, str]:
    pos, sep, seq = text.partition(":")
    if not sep or not pos.isdigit():
        fail(f"--motif must be POSITION:IUPAC (0-based), got {text!r}")
    return int(pos), seq


@app.command()
def design(
    out: Annotated[Path, typer.Option("--output", "-o", help="OUT.fa, .tsv, .csv or .parquet.")],
    length: Annotated[int, typer.Option(min=1, help="Bases per sequence.")],
    n: Annotated[int, typer.Option(min=1, max=10_000, help="Candidates to return.")] = 1,
    model: Annotated[str | None, typer.Option(help="Model folder (default: the built-in one).")] = None,
    gc: Annotated[str | None, typer.Option(help="G+C fraction MIN:MAX of the sequence.")] = None,
    gc_window: Annotated[
        int | None, typer.Option(min=1, help="Also hold --gc in every window of BP.")
    ] = None,
    avoid: Annotated[list[str] | None, typer.Option(help="IUPAC pattern banned on both strands.")] = None,
    avoid_site: Annotated[list[str] | None, typer.Option(help="Enzyme whose site is forbidden.")] = None,
    max_homopolymer: Annotated[int | None, typer.Option(min=1, help="Longest run of one base.")] = None,
    translate_to: Annotated[str | None, typer.Option(help="Protein the sequence encodes.")] = None,
    prefix: Annotated[str, typer.Option(help="Fixed first bases.")] = "",
    suffix: Annotated[str, typer.Option(help="Fixed last bases.")] = "",
    motif: Annotated[list[str] | None, typer.Option(help="POSITION:IUPAC, 0-based.")] = None,
    mask: Annotated[str | None, typer.Option(help="IUPAC code per position from the start.")] = None,
    method: Annotated[Literal["sample", "beam"], typer.Option(help="sample, or beam search.")] = "sample",
    temperature: Annotated[float, typer.Option(min=1e-6, help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(min=1e-6, max=1.0, help="Per-base nucleus.")] = 1.0,
    oversample: Annotated[int, typer.Option(min=1, max=1000, help="Draws per candidate.")] = 1,
    width: Annotated[int, typer.Option(min=1, max=1024, help="Beam width.")] = 8,
    min_distance: Annotated[int, typer.Option(min=1, help="Min Hamming distance.")] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Random seed.")] = 0,
    batch_size: Annotated[int, typer.Option(min=1, max=4096, help="Rows per batch.")] = 16,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 ...")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Design sequences under hard constraints (forbidden sites, GC, homopolymers, a protein to
    encode, fixed segments), ranked by base-level log-likelihood."""
    from hexamer.design import DesignConstraints, DesignError, DesignOptions, compile_constraints
    from hexamer.design import design as run_design
    from hexamer.design.output import check_output, write_candidates

    try:
        check_output(out)
        spec = DesignConstraints(
            length, mask=mask, prefix=prefix, suffix=suffix, motifs=tuple(_motif(m) for m in motif or ()),
            avoid=tuple(avoid or ()), avoid_sites=tuple(avoid_site or ()), max_homopolymer=max_homopolymer,
            gc=_range(gc) if gc else None, gc_window=gc_window, translate_to=translate_to,
        )  # fmt: skip
        options = DesignOptions(
            n=n, method=method, temperature=temperature, top_p=top_p, oversample=oversample,
            width=width, min_distance=min_distance, seed=seed, batch_size=batch_size,
        )  # fmt: skip
        constraints = compile_constraints(spec)
    except ValueError as exc:  # DesignError, and an unknown output format
        fail(exc)
    carbon = load_carbon(model, dtype, device, batch_size)
    try:
        with progress_bar() as progress:
            task = progress.add_task("designing", total=None, rate="")

            def tick(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total, rate=f"{done} 6-mer steps")

            result = run_design(carbon, constraints, options, on_progress=tick)
    except DesignError as exc:
        fail(exc)
    write_candidates(out, result.candidates)
    summary = {**result.summary(), "output": str(out)}
    if as_json:
        print_json(summary)
    else:
        console.print(f"wrote {out}: {summary['found']} of {n} candidates, all pass: {summary['all_pass']}")
    if summary["found"] < n:
        fail(f"found only {summary['found']} distinct candidates at --min-distance {min_distance}", code=1)
