"""``hexamer design``: sequences that meet hard constraints, decoded by the model base by base;
a thin layer over :func:`hexamer.design.design` (docs/design.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from hexamer.cli.app import DTypeOption, JsonFlag, app, fail
from hexamer.cli.design_sample import run_sampling

Method = Literal["sample", "beam", "evolve", "anneal", "minimal-edit"]


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
    length: Annotated[
        int | None, typer.Option(min=1, help="Bases per sequence (default: --start's).")
    ] = None,
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
    method: Annotated[Method, typer.Option(help="sample, beam, or an optimiser from --start.")] = "sample",
    temperature: Annotated[float, typer.Option(min=1e-6, help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(min=1e-6, max=1.0, help="Per-base nucleus.")] = 1.0,
    oversample: Annotated[int, typer.Option(min=1, max=1000, help="Draws per candidate.")] = 1,
    width: Annotated[int, typer.Option(min=1, max=1024, help="Beam width.")] = 8,
    min_distance: Annotated[int, typer.Option(min=1, help="Min Hamming distance.")] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Random seed.")] = 0,
    batch_size: Annotated[int, typer.Option(min=1, max=4096, help="Rows per batch.")] = 16,
    oracle: Annotated[str | None, typer.Option(help="FOLDER[:TARGET], pwm:FILE, motif:IUPAC.")] = None,
    specificity: Annotated[bool, typer.Option(help="Head oracle: target minus max of others.")] = False,
    pwm_threshold: Annotated[float | None, typer.Option(help="Count PWM sites scoring >= this.")] = None,
    weight: Annotated[float, typer.Option(min=0.0, help="Weight of log-likelihood per base.")] = 0.0,
    start: Annotated[str | None, typer.Option(help="Start sequence, or a one-record FASTA.")] = None,
    max_edits: Annotated[int | None, typer.Option(min=0, help="Edits allowed from --start.")] = None,
    frozen: Annotated[list[str] | None, typer.Option(help="0-based positions/ranges never edited.")] = None,
    keep: Annotated[int, typer.Option(min=1, max=10_000, help="evolve: sequences kept per round.")] = 4,
    rounds: Annotated[int, typer.Option(min=1, max=1_000_000, help="evolve: most rounds.")] = 20,
    steps: Annotated[int, typer.Option(min=1, max=10_000_000, help="anneal: proposals.")] = 1000,
    t_start: Annotated[float, typer.Option(min=1e-12, help="anneal: first temperature.")] = 1.0,
    t_end: Annotated[float, typer.Option(min=1e-12, help="anneal: last temperature.")] = 0.01,
    trajectory: Annotated[Path | None, typer.Option(help="Optimiser steps as a table.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Trajectory figure (.png/.svg/.pdf).")] = None,
    dtype: DTypeOption = "auto",
    device: Annotated[str | None, typer.Option(help="cpu, cuda, cuda:1 ...")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Design sequences under hard constraints (forbidden sites, GC, homopolymers, a protein to
    encode, fixed segments), ranked by base-level log-likelihood, or optimise one for an oracle."""
    from hexamer.cli.design_optimise import OptimiseArgs, read_start, run_optimise
    from hexamer.design import DesignConstraints, DesignOptions, compile_constraints
    from hexamer.design.output import check_output

    optimising = method in ("evolve", "anneal", "minimal-edit")
    try:
        check_output(out)
        if length is None and (not optimising or start is None):
            raise ValueError("--length is required (optimisers may take it from --start)")
        length = length if length is not None else len(read_start(start or "").strip())
        spec = DesignConstraints(
            length, mask=mask, prefix=prefix, suffix=suffix, motifs=tuple(_motif(m) for m in motif or ()),
            avoid=tuple(avoid or ()), avoid_sites=tuple(avoid_site or ()), max_homopolymer=max_homopolymer,
            gc=_range(gc) if gc else None, gc_window=gc_window, translate_to=translate_to,
        )  # fmt: skip
        if not optimising:
            options = DesignOptions(
                n=n, method=method, temperature=temperature, top_p=top_p, oversample=oversample,  # type: ignore[arg-type]
                width=width, min_distance=min_distance, seed=seed, batch_size=batch_size,
            )  # fmt: skip
        constraints = compile_constraints(spec)
    except ValueError as exc:  # DesignError, and an unknown output format
        fail(exc)
    if optimising:
        opt = OptimiseArgs(
            method, oracle, specificity, pwm_threshold, weight, start, max_edits, list(frozen or ()),
            keep, rounds, steps, t_start, t_end, n, seed, trajectory, plot,
        )  # fmt: skip
        return run_optimise(opt, spec, out, model=model, dtype=dtype, device=device, as_json=as_json)
    run_sampling(constraints, options, out, model=model, dtype=dtype, device=device, as_json=as_json)
