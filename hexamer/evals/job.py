"""The eval batch job (``hexamer eval``): tasks x levels scored on a model (one task from its
data, or a suite under a data root), then ``summary.json`` and an optional report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.evals.runner import EvalResult

__all__ = ["REPORT_SUFFIXES", "EvalJobSettings", "run_evaluation", "write_eval_outputs"]

#: what a report can be written as (the format follows the extension)
REPORT_SUFFIXES = (".html", ".htm", ".md", ".markdown", ".json")


@dataclass(frozen=True)
class EvalJobSettings:
    """How each task runs and where its files go: a seeded sample of ``limit`` rows, ``seed``
    (the sample and the bootstrap), ``batch_size``, task ``options`` (``key: value``), the
    per-example record cache (None: off), the output folder, ``n_boot`` bootstrap resamples and
    the ``report`` file (None: none)."""

    limit: int | None = None
    seed: int = 0
    batch_size: int = 16
    options: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: Path | None = None
    out_dir: Path = Path("hexamer-eval")
    n_boot: int = 1000
    report: Path | None = None

    def run_options(self) -> dict[str, Any]:
        """The keywords of :func:`~hexamer.evals.runner.run_task` and ``run_suite``."""
        return {
            "limit": self.limit,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "options": dict(self.options),
            "cache_dir": self.cache_dir,
            "out_dir": self.out_dir,
            "n_boot": self.n_boot,
        }


def run_evaluation(
    carbon: Carbon,
    tasks: Sequence[str],
    levels: Sequence[Any],
    settings: EvalJobSettings,
    *,
    data: str | None = None,
    data_root: Path | None = None,
    export_dir: Path | None = None,
    progress: Any = None,
    on_note: Callable[[str], None] | None = None,
) -> list[EvalResult]:
    """With ``data``: the one task of ``tasks`` on that file or folder (local, or ``hf://``,
    materialised under ``export_dir``) at each of ``levels`` it has (the others noted), a bad
    dataset raising. Else every task under ``data_root`` (a task without its data is a
    ``skipped`` result, a failing one an ``error`` result)."""
    from hexamer.evals.registry import get_task
    from hexamer.evals.runner import run_suite, run_task

    options = settings.run_options()
    if data is None:
        root = data_root if data_root is not None else Path(".")
        return run_suite(carbon, root, tasks=tasks, levels=levels, progress=progress, **options)
    from hexamer.evals.data import materialize

    task = get_task(tasks[0])
    local = materialize(data, export_dir=export_dir)
    results = []
    for level in levels:
        if level not in task.levels:
            if on_note is not None:
                on_note(f"{tasks[0]} has no {level} level; skipped")
            continue
        results.append(run_task(task, local, carbon, level=level, progress=progress, **options))
    return results


def write_eval_outputs(
    results: Sequence[EvalResult], settings: EvalJobSettings, meta: Mapping[str, Any]
) -> Path:
    """``summary.json`` in the output folder (created) and the report, when there is one; the
    summary's path."""
    from hexamer.evals.report import write_report
    from hexamer.evals.runner import write_json

    settings.out_dir.mkdir(parents=True, exist_ok=True)
    summary = settings.out_dir / "summary.json"
    write_json(results, summary, {"meta": meta})
    if settings.report is not None:
        write_report(results, settings.report, meta)
    return summary
