"""`run_kfold`: k-fold cross-validation of a fine-tuning recipe, the Nucleotide Transformer
benchmark protocol (10 folds, the test metric reported as mean ± 2 s.d. over folds).

With a test input, each fold of the training input in turn is the validation set (best checkpoint,
early stopping) and every fold's model is scored on the same test rows. Without one, each fold in
turn is the test set and the model trains for the fixed epochs / steps without validation. Each
fold is a full run (:func:`~hexamer.finetune.run.train_on_split`) in ``OUT/fold_01`` ...; the
top-level ``metrics.json`` holds every fold's test metrics and their summary (model and baseline).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hexamer.finetune.data import ReadOptions
from hexamer.finetune.options import FitOptions
from hexamer.finetune.report import require_packages, write_json
from hexamer.finetune.run import InputSpec, RunResult, SplitSpec, TrainJob, read_all, train_on_split
from hexamer.finetune.splits import fold_summary, kfold_splits

__all__ = ["run_kfold"]


def _test_metrics(result: RunResult, part: str) -> dict[str, Any]:
    block = result.metrics.get(part, {})
    metrics = block.get("metrics", block) if part == "baseline" else block
    return metrics.get("test", {})


def _summaries(runs: list[RunResult], key: str, part: str) -> dict[str, Any]:
    """fold_summary of every top-level metric of the test set (``part``: model or baseline)."""
    first = _test_metrics(runs[0], part)
    names = [
        k for k, v in first.items() if k not in ("n", "excluded") and (v is None or isinstance(v, float))
    ]
    out = {name: fold_summary([_test_metrics(r, part).get(name) for r in runs]) for name in names}
    return {"selection_metric": key, **out}


def run_kfold(
    model: str,
    train: InputSpec,
    output_dir: str | os.PathLike[str],
    read: ReadOptions,
    fit_options: FitOptions | None = None,
    *,
    test: InputSpec | None = None,
    folds: int = 10,
    seed: int = 0,
    baseline: bool = True,
    on_progress: Callable[[Any], None] | None = None,
) -> RunResult:
    """Cross-validate (see the module text); returns the summary run (``model_folder``: the first
    fold's best model; every fold's model is in its own folder)."""
    require_packages(baseline=baseline)
    started = time.perf_counter()
    no_split = SplitSpec(valid_fraction=0.0, test_fraction=0.0, seed=seed)
    task, data, _, whole, notes = read_all(model, train, None, test, read, no_split)
    strat = data.labels if task.kind in ("binary", "multiclass") else None
    splits = kfold_splits(
        len(data),
        folds=folds,
        seed=seed,
        stratify=strat,
        test=whole.test,
        holdout="valid" if test else "test",
    )
    inputs = {k: dataclasses.asdict(v) for k, v in (("train", train), ("test", test)) if v}
    job = TrainJob(model, task, data, fit_options or FitOptions(seed=seed), notes, inputs, baseline, None,
                   False, on_progress, seed)  # fmt: skip
    out = Path(output_dir)
    runs = [train_on_split(job, sp, out / f"fold_{k + 1:02d}") for k, sp in enumerate(splits)]
    key = runs[0].metrics["selection_metric"]
    metrics: dict[str, Any] = {
        "task": task.to_json(),
        "selection_metric": key,
        "protocol": f"{folds}-fold cross-validation, "
        + ("each fold validates, fixed test set" if test else "each fold is the test set"),
        "folds": [
            {"fold": k + 1, "split": r.metrics["split"], "folder": str(r.output_dir)}
            for k, r in enumerate(runs)
        ],
        "model": _summaries(runs, key, "model"),
        "notes": notes,
    }
    if baseline:
        metrics["baseline"] = _summaries(runs, key, "baseline")
    write_json(out / "metrics.json", metrics)
    files = [out / "metrics.json"] + [f for r in runs for f in r.files]
    return RunResult(out, runs[0].model_folder, metrics, files, time.perf_counter() - started)
