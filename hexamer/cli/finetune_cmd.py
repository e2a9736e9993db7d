"""``hexamer finetune``: a thin layer over :func:`hexamer.finetune.run.run_finetune`.

Every input problem (a bad row, a split that matches nothing, a sequence longer than the model's
context, an option out of range) is one ``error: ...`` line on stderr and exit status 2, before the
model is loaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import JsonFlag, ModelOption, app, console, err_console, fail, print_json, resolve_model
from hexamer.cli.finetune_options import FitValues, fit_options
from hexamer.cli.option_groups import FILLED

__all__ = ["finetune"]


def _names(text: str | None) -> tuple[str, ...]:
    return tuple(p.strip() for p in (text or "").split(",") if p.strip())


DATA = "Data"
SPLIT = "Split"
TRAINING = "Training"


def _opt(help_text: str, panel: str, *names: str, **kw: Any) -> Any:
    return typer.Option(*names, help=help_text, rich_help_panel=panel, **kw)


TrainOpt = Annotated[
    str, _opt("Training input: Parquet/CSV/TSV table, FASTA or BED (with --labels); - = stdin.", DATA)
]
ValidOpt = Annotated[str | None, _opt("Validation input (else split off --train).", DATA)]
TestOpt = Annotated[str | None, _opt("Test input (else split off --train).", DATA)]
LabelsOpt = Annotated[str | None, _opt("Labels table joined by name to FASTA / BED inputs.", DATA)]
ReferenceOpt = Annotated[str | None, _opt("Reference FASTA for BED inputs or tables of regions.", DATA)]
TaskOpt = Annotated[Literal["regression", "classification"], _opt("Task kind (classes from the data).", DATA)]
LabelColumnsOpt = Annotated[str, _opt("Label column(s), comma-separated.", DATA)]
SequenceColumnOpt = Annotated[str, _opt("Sequence column of a table.", DATA)]
IdColumnOpt = Annotated[
    str | None, _opt("Id column (default: 'id' when present; the join key of --labels).", DATA)
]
ChromColumnOpt = Annotated[str | None, _opt("Chromosome column (default: 'chrom' when present).", DATA)]
WeightColumnOpt = Annotated[str | None, _opt("Per-row loss weight column.", DATA)]
FilterOpt = Annotated[
    str | None, _opt("Rows that count in metrics, e.g. 'lfcSE_K562<=1,lfcSE_HepG2<=1'.", DATA)
]
ChromsOpt = Annotated[str | None, _opt("Chromosomes, comma-separated (chr prefix optional).", SPLIT)]
SplitColumnOpt = Annotated[str | None, _opt("Column of train/valid/test values.", SPLIT)]
FoldsOpt = Annotated[
    int | None,
    _opt("k-fold cross-validation (NT protocol: 10); with --test, folds validate.", SPLIT, min=2, max=100),
]
FractionOpt = Annotated[float, _opt("Fraction of --train for a random split.", SPLIT, min=0.0, max=0.9)]
DupQuantileOpt = Annotated[
    float | None, _opt("Repeat training rows above this label quantile.", TRAINING, min=0.01, max=0.999)
]
DupAboveOpt = Annotated[
    float | None,
    _opt("Repeat training rows with any raw label above this value (Malinois: 0.5).", TRAINING),
]
DupCopiesOpt = Annotated[int, _opt("Extra copies of each high-activity row.", TRAINING, min=1, max=100)]
SeedOpt = Annotated[int, _opt("Seed of the split, the head and the batches.", TRAINING, min=0, max=2**63 - 1)]


def _progress(quiet: bool) -> tuple[Any, Any]:
    """A progress bar with ETA on stderr, shown from the first training step (reading and checking
    the inputs print nothing), and the callback that moves it."""
    from hexamer.progress import progress_bar

    bar = progress_bar("fine-tuning", "loss {task.fields[loss]}", console=err_console, disable=quiet)
    task = bar.add_task("fit", total=None, loss="-", start=False)

    def update(p: Any) -> None:
        if not bar.live.is_started:
            bar.start()
            bar.start_task(task)
        bar.update(task, completed=p.step, total=p.total_steps, loss=f"{p.train_loss:.4f}")

    return bar, update


def _check_kfold(valid: str | None, split: Any, dup: Any, resume: bool) -> None:
    given = [
        name
        for name, on in (
            ("--valid", valid is not None),
            ("--split-column", split.column is not None),
            ("--valid-chroms/--test-chroms", bool(split.valid_chroms or split.test_chroms)),
            ("--duplicate-quantile/--duplicate-above", dup is not None),
            ("--resume", resume),
        )
        if on
    ]
    if given:
        raise typer.BadParameter(f"--folds makes its own splits; drop {', '.join(given)}")


def _print_folds(summary: dict[str, Any]) -> None:
    key, model, base = summary["selection_metric"], summary["model_test"], summary["baseline_test"]

    def shown(s: dict[str, Any] | None) -> str:
        if not s or s["mean"] is None:
            return "undefined"
        spread = "" if s["sd"] is None else f" ± {2 * s['sd']:.4f} (2 s.d.)"
        return f"{s['mean']:.4f}{spread} over {s['defined']} of {s['folds']} folds"

    console.print(f"{summary['protocol']}: test {key} {shown(model)}")
    if base is not None:
        console.print(f"k-mer baseline: test {key} {shown(base)}")
    console.print(f"every fold's model, metrics and predictions in {summary['output_dir']}")


@app.command("finetune")
@fit_options
def finetune(
    train: TrainOpt,
    task: TaskOpt,
    label_columns: LabelColumnsOpt,
    output_dir: Annotated[
        Path, typer.Option(help="Folder for the model, metrics.json, predictions and figures.")
    ],
    model: ModelOption = None,
    valid: ValidOpt = None,
    test: TestOpt = None,
    labels: LabelsOpt = None,
    reference: ReferenceOpt = None,
    sequence_column: SequenceColumnOpt = "sequence",
    id_column: IdColumnOpt = None,
    chrom_column: ChromColumnOpt = None,
    weight_column: WeightColumnOpt = None,
    metric_filter: FilterOpt = None,
    split_column: SplitColumnOpt = None,
    valid_chroms: ChromsOpt = None,
    test_chroms: ChromsOpt = None,
    folds: FoldsOpt = None,
    valid_fraction: FractionOpt = 0.1,
    test_fraction: FractionOpt = 0.1,
    fit: FitValues = FILLED,
    seed: SeedOpt = 0,
    duplicate_quantile: DupQuantileOpt = None,
    duplicate_above: DupAboveOpt = None,
    duplicate_copies: DupCopiesOpt = 1,
    baseline: Annotated[bool, _opt("Fit the k-mer baseline on the same split.", TRAINING)] = True,
    resume: Annotated[bool, _opt("Continue the run checkpointed in --output-dir.", TRAINING)] = False,
    device: Annotated[str, _opt("cpu, cuda, cuda:1 ...", TRAINING)] = "cpu",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Fine-tune a regression or classification head (docs/finetune.md)."""
    from hexamer.finetune.data import ReadOptions
    from hexamer.finetune.kfold import run_kfold
    from hexamer.finetune.run import InputSpec, SplitSpec, run_finetune

    try:
        read = ReadOptions(
            task, _names(label_columns), sequence_column, id_column, chrom_column, weight_column,
            split_column, _names(metric_filter),
        )  # fmt: skip
        split = SplitSpec(
            split_column, _names(valid_chroms), _names(test_chroms), valid_fraction, test_fraction, seed
        )
        options = fit.options(seed, device)
    except ValueError as exc:
        fail(exc)
    specs = [None if p is None else InputSpec(p, labels, reference) for p in (train, valid, test)]
    if duplicate_quantile is not None and duplicate_above is not None:
        raise typer.BadParameter("give --duplicate-quantile or --duplicate-above, not both")
    dup = None if duplicate_quantile is None else (duplicate_quantile, duplicate_copies)
    dup_above = None if duplicate_above is None else (duplicate_above, duplicate_copies)
    if folds is not None:
        _check_kfold(valid, split, dup or dup_above, resume)
    bar, update = _progress(quiet or as_json)
    try:
        try:
            if folds is not None:
                result = run_kfold(
                    resolve_model(model), specs[0], output_dir, read, options, test=specs[2], folds=folds,
                    seed=seed, baseline=baseline, on_progress=update,
                )  # fmt: skip
            else:
                result = run_finetune(
                    resolve_model(model), specs[0], output_dir, read, options, valid=specs[1], test=specs[2],
                    split=split, baseline=baseline, duplicate=dup, duplicate_above=dup_above, resume=resume, on_progress=update,
                )  # fmt: skip
        finally:
            bar.stop()
    except (ValueError, FileNotFoundError, ImportError) as exc:
        fail(exc)
    summary = result.summary()
    if as_json:
        print_json(summary)
    elif folds is not None:
        _print_folds(summary)
    else:
        _print_run(summary, result)


def _print_run(summary: dict[str, Any], result: Any) -> None:
    key = summary["selection_metric"]
    for name, value in summary["model_metrics"].items():
        base = summary["baseline_metrics"].get(name)
        shown = "undefined" if value is None else f"{value:.4f}"
        console.print(f"{name}: {key} {shown}" + ("" if base is None else f" (k-mer baseline {base:.4f})"))
    console.print(f"model: {result.model_folder}; metrics, predictions and figures in {result.output_dir}")
