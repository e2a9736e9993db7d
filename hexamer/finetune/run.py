"""`run_finetune`: one fine-tuning run from files to a report — read → check → split → transform →
baseline → fit → predict → report. What ``hexamer finetune`` calls.

Every input is read and checked (labels, sequences, lengths against the model's context, the split)
before the model is loaded, so a bad row fails in seconds, not after an epoch. The output folder
holds the best model (``best/``, a head folder ``transformers`` also loads), ``metrics.json``
(model and baseline, per set), ``predictions.tsv`` (every row read, its set, raw-scale labels and
predictions), figures, and the resumable checkpoint of the fit.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.finetune.baseline import run_baseline
from hexamer.finetune.data import ReadOptions, ReadResult, check_lengths, load_bed, load_fasta, load_table
from hexamer.finetune.inputs import DataError
from hexamer.finetune.metrics import evaluate, metric_for
from hexamer.finetune.options import FitOptions
from hexamer.finetune.report import (
    plot_classification_curves,
    plot_history,
    plot_observed_vs_predicted,
    prediction_rows,
    require_packages,
    write_json,
    write_predictions,
)
from hexamer.finetune.splits import Split, SplitError, split_by_chromosome, split_by_column, split_random
from hexamer.finetune.task import LabelledSet, TaskSpec
from hexamer.finetune.transform import LabelTransform, duplicate_high_activity

__all__ = [
    "InputSpec",
    "RunResult",
    "SplitSpec",
    "TrainJob",
    "context_bp",
    "read_all",
    "read_input",
    "run_finetune",
    "train_on_split",
]

_FASTA_SUFFIXES = (".fa", ".fasta", ".fna", ".fq", ".fastq")
SETS = ("train", "valid", "test")


@dataclass(frozen=True)
class InputSpec:
    """One input: a table, or FASTA / BED (``.bed``) with a ``labels`` table joined by name; a
    ``reference`` FASTA for BED and for tables of regions (``chrom``/``start``/``end``)."""

    path: str
    labels: str | None = None
    reference: str | None = None
    format: str | None = None


@dataclass(frozen=True)
class SplitSpec:
    """How the training input is split when no ``--valid`` / ``--test`` file gives a set: by
    ``column`` when named, by chromosome when ``valid_chroms`` or ``test_chroms`` is given, else at
    random (seeded; stratified for classification)."""

    column: str | None = None
    valid_chroms: tuple[str, ...] = ()
    test_chroms: tuple[str, ...] = ()
    valid_fraction: float = 0.1
    test_fraction: float = 0.1
    seed: int = 0


@dataclass(frozen=True)
class RunResult:
    """Where everything went and the headline numbers."""

    output_dir: Path
    model_folder: Path
    metrics: dict[str, Any]
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """The one-line JSON of ``hexamer finetune --json``."""
        m = self.metrics
        key = m["selection_metric"]
        if "folds" in m:  # a cross-validation (hexamer.finetune.kfold)
            return {
                "output_dir": str(self.output_dir),
                "task": m["task"]["kind"],
                "protocol": m["protocol"],
                "folds": len(m["folds"]),
                "selection_metric": key,
                "model_test": m["model"][key],
                "baseline_test": m.get("baseline", {}).get(key),
                "files": [str(p) for p in self.files],
                "seconds": round(self.seconds, 1),
            }
        return {
            "output_dir": str(self.output_dir),
            "model": str(self.model_folder),
            "task": m["task"]["kind"],
            "split": m["split"],
            "selection_metric": key,
            "model_metrics": {s: m["model"][s].get(key) for s in m["model"]},
            "baseline_metrics": {s: v.get(key) for s, v in m.get("baseline", {}).get("metrics", {}).items()},
            "best_step": m["fit"]["best_step"],
            "files": [str(p) for p in self.files],
            "seconds": round(self.seconds, 1),
        }


def read_input(spec: InputSpec, opts: ReadOptions) -> ReadResult:
    """Read one input as its file name says (see :class:`InputSpec`)."""
    name = spec.path.lower().removesuffix(".gz")
    if name.endswith(".bed"):
        if spec.labels is None or spec.reference is None:
            raise DataError(spec.path, "BED regions need a labels table and a reference FASTA")
        return load_bed(spec.path, spec.reference, spec.labels, opts, format=spec.format)
    if name.endswith(_FASTA_SUFFIXES):
        if spec.labels is None:
            raise DataError(spec.path, "FASTA input needs a labels table (joined by record name)")
        return load_fasta(spec.path, spec.labels, opts, format=spec.format)
    return load_table(spec.path, opts, format=spec.format, reference=spec.reference)


def context_bp(model: str | os.PathLike[str]) -> int:
    """Bases the model's context holds: ``<dna>`` + 6-mers + ``</dna>`` in its positions."""
    from hexamer.model.checkpoint import read_folder_config
    from hexamer.tokenizer import CarbonTokenizer

    _, config = read_folder_config(model)
    k = CarbonTokenizer.from_pretrained(model).layout.k
    return (config.max_position_embeddings - 2) * k


def _concat(parts: Sequence[LabelledSet]) -> LabelledSet:
    """Rows of several inputs in order; optional columns kept only when every part has them."""

    def join(name: str) -> Any:
        values = [getattr(p, name) for p in parts]
        if any(v is None for v in values):
            return None
        return np.concatenate(values) if isinstance(values[0], np.ndarray) else sum(map(tuple, values), ())

    return LabelledSet(
        ids=sum((p.ids for p in parts), ()),
        sequences=sum((p.sequences for p in parts), ()),
        labels=np.concatenate([p.labels for p in parts]),
        weights=join("weights"),
        chroms=join("chroms"),
        metric_mask=join("metric_mask"),
    )


def _split_train(first: ReadResult, spec: SplitSpec, *, want_valid: bool, want_test: bool) -> Split:
    n = len(first.data)
    if spec.column is not None:
        assert first.split_values is not None
        return split_by_column(first.split_values, column=spec.column, source=first.source)
    if spec.valid_chroms or spec.test_chroms:
        return split_by_chromosome(
            first.data.chroms, valid_chroms=spec.valid_chroms, test_chroms=spec.test_chroms
        )
    strat = first.data.labels if first.task.kind in ("binary", "multiclass") else None
    return split_random(
        n,
        valid_fraction=spec.valid_fraction if want_valid else 0.0,
        test_fraction=spec.test_fraction if want_test else 0.0,
        seed=spec.seed,
        stratify=strat,
    )


def read_all(
    model: str,
    train: InputSpec,
    valid: InputSpec | None,
    test: InputSpec | None,
    opts: ReadOptions,
    split: SplitSpec,
) -> tuple[TaskSpec, LabelledSet, list[str], Split, list[str]]:
    """Every row read (train input first), its set name, the split, and the notes; every input's
    sequences checked against the model's context (its own rows named)."""
    if split.column is not None:
        opts = dataclasses.replace(opts, split_column=split.column)
    first = read_input(train, opts)
    fixed = dataclasses.replace(opts, class_names=first.task.class_names, split_column=None)
    extra = {name: read_input(s, fixed) for name, s in (("valid", valid), ("test", test)) if s is not None}
    for name, res in extra.items():
        if res.task.kind != first.task.kind:
            raise DataError(
                res.source, f"the {name} labels make a {res.task.kind} task, training a {first.task.kind} one"
            )
    sp = _split_train(first, split, want_valid="valid" not in extra, want_test="test" not in extra)
    names = sp.labels(len(first.data))
    for name, res in extra.items():  # a set given as its own file replaces the one split off train
        names = ["train" if s == name else s for s in names]
        names += [name] * len(res.data)
    parts, notes = [first.data], [*first.notes]
    seen = set(first.data.ids)
    for name, res in extra.items():
        clash = [i for i in res.data.ids if i in seen]
        if clash:  # e.g. row1, row2 ... in files without an id column
            ids = tuple(f"{name}:{i}" if i in seen else i for i in res.data.ids)
            notes.append(f"{len(clash)} {name} id(s) also in an earlier input are written as '{name}:<id>'")
            res = dataclasses.replace(res, data=dataclasses.replace(res.data, ids=ids))
        seen.update(res.data.ids)
        parts.append(res.data)
        notes += res.notes
    data = _concat(parts)
    index = {s: np.flatnonzero(np.asarray(names) == s) for s in SETS}
    if index["train"].size == 0:
        raise SplitError(f"{sp.method}: the training set is empty")
    final = Split(index["train"], index["valid"], index["test"], sp.method, sp.notes)
    max_bp = context_bp(model)
    for res in (first, *extra.values()):
        check_lengths(res.data, max_bp, source=res.source)
    notes += sp.notes
    return first.task, data, names, final, notes


def _fit_model(
    model: str, task: TaskSpec, sets: dict[str, LabelledSet], transform: LabelTransform, fit_options: FitOptions,
    out: Path, resume: bool, on_progress: Callable[[Any], None] | None,
) -> Any:  # fmt: skip
    from hexamer.finetune.fit import fit

    valid = sets["valid"] if len(sets["valid"]) else None
    metric, higher = metric_for(task)
    return fit(
        model, transform.apply(sets["train_fit"]), None if valid is None else transform.apply(valid), task,
        fit_options, out, metric=metric if valid is not None else None, higher_is_better=higher,
        on_progress=on_progress, resume=resume, label_transform=transform.to_json(),
    )  # fmt: skip


def _finite(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History records with a non-finite number (a diverged loss) written as None: strict JSON."""
    return [
        {k: None if isinstance(v, float) and not np.isfinite(v) else v for k, v in rec.items()}
        for rec in history
    ]


def _figures(
    out: Path,
    task: TaskSpec,
    sets: dict[str, LabelledSet],
    preds: dict[str, np.ndarray],
    history: list[dict[str, Any]],
) -> list[Path]:
    files = []
    for name in ("valid", "test"):
        if name not in preds:
            continue
        if task.kind == "regression":
            path = out / f"scatter_{name}.png"
            plot_observed_vs_predicted(path, task.label_columns, sets[name].labels, preds[name], title=name)
            files.append(path)
        else:
            roc, pr = out / f"roc_{name}.png", out / f"pr_{name}.png"
            plot_classification_curves(roc, pr, task, sets[name].labels, preds[name])
            files += [roc, pr]
    if history:
        files.append(out / "curves.png")
        plot_history(files[-1], history)
    return files


def run_finetune(
    model: str,
    train: InputSpec,
    output_dir: str | os.PathLike[str],
    read: ReadOptions,
    fit_options: FitOptions | None = None,
    *,
    valid: InputSpec | None = None,
    test: InputSpec | None = None,
    split: SplitSpec = SplitSpec(),
    baseline: bool = True,
    duplicate: tuple[float, int] | None = None,
    duplicate_above: tuple[float, int] | None = None,
    resume: bool = False,
    on_progress: Callable[[Any], None] | None = None,
) -> RunResult:
    """Fine-tune ``model`` on ``train`` (see the module text); ``fit_options`` a
    :class:`~hexamer.finetune.options.FitOptions` (default: its defaults); ``duplicate`` =
    ``(quantile, copies)`` repeats high-activity training rows (regression): those with any label
    above that quantile of the training rows, or with ``duplicate_above = (threshold, copies)``
    any raw label above the threshold (the Malinois recipe's rule: ``(0.5, 1)``)."""
    if duplicate is not None and duplicate_above is not None:
        raise ValueError("give duplicate (a quantile) or duplicate_above (a threshold), not both")
    rule = None if duplicate is None else ("quantile", *duplicate)
    rule = rule if duplicate_above is None else ("threshold", *duplicate_above)
    require_packages(baseline=baseline)
    started = time.perf_counter()
    task, data, _, sp, notes = read_all(model, train, valid, test, read, split)
    inputs = {k: dataclasses.asdict(v) for k, v in (("train", train), ("valid", valid), ("test", test)) if v}
    job = TrainJob(
        model, task, data, fit_options or FitOptions(seed=split.seed), notes, inputs, baseline, rule,
        resume, on_progress, split.seed,
    )  # fmt: skip
    result = train_on_split(job, sp, Path(output_dir))
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


@dataclass(frozen=True)
class TrainJob:
    """What every split of one run shares (:func:`train_on_split`)."""

    model: str
    task: TaskSpec
    data: LabelledSet
    options: Any
    notes: list[str]
    inputs: dict[str, Any]
    baseline: bool = True
    #: ``("quantile", q, copies)`` or ``("threshold", t, copies)``: high-activity rows repeated
    duplicate: tuple[str, float, int] | None = None
    resume: bool = False
    on_progress: Callable[[Any], None] | None = None
    seed: int = 0


def train_on_split(job: TrainJob, sp: Split, out: Path) -> RunResult:
    """z-score on the split's training rows → baseline → fit → predict every row → report in ``out``."""
    from hexamer.finetune.predict import predict

    task, data, options, notes = job.task, job.data, job.options, list(job.notes)
    sets = dict(zip(SETS, sp.sets(data), strict=True))
    transform = LabelTransform.fit(task, sets["train"].labels)
    sets["train_fit"] = sets["train"]
    if job.duplicate is not None:
        rule, value, copies = job.duplicate
        cut = {"quantile": None, "threshold": None, rule: value}
        sets["train_fit"], n_dup = duplicate_high_activity(sets["train"], copies=copies, **cut)
        notes.append(f"{n_dup} high-activity training rows repeated {copies} more time(s)")
    out.mkdir(parents=True, exist_ok=True)
    base = (
        run_baseline(task, sets["train"], sets["valid"], sets["test"], seed=job.seed)
        if job.baseline
        else None
    )
    result = _fit_model(job.model, task, sets, transform, options, out, job.resume, job.on_progress)
    outputs = predict(
        result.best_folder, data.sequences, batch_size=options.eval_batch_size, bf16=options.bf16,
        device=options.device,
    )  # fmt: skip
    raw = transform.inverse(outputs)
    preds = {s: raw[getattr(sp, s)] for s in SETS if getattr(sp, s).size}
    metrics = {
        "task": task.to_json(),
        "selection_metric": metric_for(task)[0].__name__,
        "split": sp.to_json(),
        "model": {s: evaluate(task, sets[s].labels, preds[s], mask=sets[s].metric_mask) for s in preds},
        "fit": {
            "method": options.method,
            "best_step": result.best_step,
            "best_score": result.best_score,
            "steps": result.steps,
            "stopped_early": result.stopped_early,
            "history": _finite(result.history),
        },
        "label_transform": transform.to_json(),
        "inputs": job.inputs,
        "notes": notes + (list(base.notes) if base else []),
    }
    base_all = None
    if base is not None:
        metrics["baseline"] = base.to_json()
        base_all = np.zeros_like(raw)
        for s, values in base.outputs.items():
            base_all[getattr(sp, s)] = values
    files = [out / "metrics.json", out / "predictions.tsv"]
    write_json(files[0], metrics)
    write_predictions(files[1], prediction_rows(task, data, sp.labels(len(data)), raw, baseline=base_all))
    files += _figures(out, task, sets, preds, result.history)
    return RunResult(out, result.best_folder, metrics, files)
