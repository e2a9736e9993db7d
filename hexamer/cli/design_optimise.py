"""``hexamer design --method evolve|anneal|minimal-edit``: oracle-guided optimisation under the same
rules, a thin layer over :func:`hexamer.design.optimise.job.optimise_design` (docs/design.md).
Every option is checked (and the oracle's files read) before the model loads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hexamer.cli.app import console, fail, print_json
from hexamer.cli.sequence_jobs import load_carbon, progress_bar

__all__ = ["OptimiseArgs", "run_optimise"]


@dataclass(frozen=True)
class OptimiseArgs:
    """The optimisation options of ``hexamer design`` as given."""

    method: str
    oracle: str | None
    specificity: bool
    pwm_threshold: float | None
    weight: float
    start: str | None
    max_edits: int | None
    frozen: list[str]
    keep: int
    rounds: int
    steps: int
    t_start: float
    t_end: float
    n: int
    seed: int
    trajectory: Path | None
    plot: Path | None


def read_start(text: str) -> str:
    """``--start``: a sequence, or a FASTA file holding one record."""
    path = Path(text)
    if not path.is_file():
        return text
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    headers = [ln for ln in lines if ln.startswith(">")]
    if len(headers) > 1:
        raise ValueError(f"{path}: --start takes one sequence; the file holds {len(headers)} records")
    return "".join(ln for ln in lines if not ln.startswith(">"))


def _checked(args: OptimiseArgs, spec: Any) -> tuple[Any, Any, str | None]:
    """Options, oracle description and start sequence, all checked before any model work."""
    from hexamer.design.optimise.job import OptimiseOptions, check_start, parse_positions
    from hexamer.design.optimise.oracle_spec import parse_oracle
    from hexamer.io.writers import table_format
    from hexamer.plots import FIGURE_FORMATS

    if args.oracle is None:
        raise ValueError(f"--method {args.method} needs --oracle (FOLDER[:TARGET], pwm:FILE, motif:IUPAC)")
    options = OptimiseOptions(
        method=args.method, weight=args.weight, n=args.n, keep=args.keep, rounds=args.rounds,  # type: ignore[arg-type]
        steps=args.steps, t_start=args.t_start, t_end=args.t_end, seed=args.seed, max_edits=args.max_edits,
        frozen=parse_positions(args.frozen),
    )  # fmt: skip
    options.check(spec.length)
    oracle = parse_oracle(args.oracle, specificity=args.specificity, threshold=args.pwm_threshold)
    start = check_start(spec, read_start(args.start)) if args.start is not None else None
    if args.trajectory is not None:
        table_format(args.trajectory)
    if args.plot is not None and args.plot.suffix.lower().lstrip(".") not in FIGURE_FORMATS:
        raise ValueError(f"--plot {args.plot}: figures are .{', .'.join(FIGURE_FORMATS)}")
    return options, oracle, start


def run_optimise(
    args: OptimiseArgs,
    spec: Any,
    out: Path,
    *,
    model: str | None,
    dtype: str,
    device: str | None,
    as_json: bool,
) -> None:
    """Check, load, optimise, write the candidates (``out``), the trajectory and its plot."""
    from hexamer.design import DesignError
    from hexamer.design.optimise import plot_trajectory
    from hexamer.design.optimise.job import optimise_design
    from hexamer.design.output import write_candidates
    from hexamer.io.writers import write_table

    try:
        options, oracle_spec, start = _checked(args, spec)
    except ValueError as exc:  # DesignError, an unreadable matrix, a head folder's target
        fail(exc)
    carbon = load_carbon(model, dtype, device, 16)
    try:
        oracle = oracle_spec.build(device=device or "cpu")
    except ValueError as exc:
        fail(exc)
    total = {"evolve": options.rounds, "anneal": options.steps}.get(options.method, options.max_edits)
    try:
        with progress_bar() as progress:
            task = progress.add_task(options.method, total=total, rate="")

            def tick(step: Any) -> None:
                progress.update(task, completed=step.step, rate=f"objective {step.objective:.4g}")

            result = optimise_design(carbon, spec, oracle, options, start=start, on_step=tick)
    except DesignError as exc:
        fail(exc)
    write_candidates(out, result.candidates)
    if args.trajectory is not None:
        write_table(args.trajectory, result.run.rows())
    if args.plot is not None:
        plot_trajectory(args.plot, result.run.trajectory, title=f"{options.method}: {oracle.name}")
    summary = {**result.summary(), "output": str(out)}
    summary["trajectory"] = str(args.trajectory) if args.trajectory else None
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"wrote {out}: {options.method} {summary['steps']} steps, objective "
            f"{summary['start_objective']:.4g} -> {summary['best_objective']:.4g}, {summary['n_edits']} edits"
        )
