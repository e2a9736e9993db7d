"""The sampling half of ``hexamer design``: the model loaded, the candidates decoded with a
progress bar, written, and summarised (docs/design.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hexamer.cli.app import console, fail, print_json
from hexamer.cli.sequence_jobs import load_carbon, progress_bar

if TYPE_CHECKING:
    from hexamer.design.api import DesignOptions
    from hexamer.design.constraints import ConstraintSet


def run_sampling(
    constraints: ConstraintSet,
    options: DesignOptions,
    out: Path,
    *,
    model: str | None,
    dtype: str,
    device: str | None,
    as_json: bool,
) -> None:
    """Decode ``options.n`` candidates under ``constraints`` and write them to ``out``; exit 1
    when fewer distinct candidates than asked were found."""
    from hexamer.design import DesignError
    from hexamer.design import design as run_design
    from hexamer.design.output import write_candidates

    n, min_distance = options.n, options.min_distance
    carbon = load_carbon(model, dtype, device, options.batch_size)
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
