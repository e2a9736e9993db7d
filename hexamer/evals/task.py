"""The contract every zero-shot task follows, so one runner can cache, resume, bootstrap and report them.

A task turns the public dataset's own file into examples (plain dicts with a unique ``"id"``), scores
examples into per-example records (dicts with the same ``"id"``, JSON-serialisable values only), and
computes its metrics from records with scikit-learn/scipy. The runner (:mod:`hexamer.evals.runner`)
owns caching, ``--limit``, bootstrap confidence intervals, JSON and the report.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

Level = Literal["token", "bp"]
Example = dict[str, Any]
Record = dict[str, Any]


def roc_pr_plots(
    task: Task, out_dir: Path, labelled: Sequence[tuple[int, float]], *, score: str, classes: str
) -> list[Path]:
    """The ROC and precision-recall PNGs of a binary task (``NAME-roc.png``, ``NAME-pr.png`` in
    ``out_dir``) from ``(label, score)`` pairs, the curve named ``score``; none unless both classes
    occur. ``classes`` says which is which in the ROC title, e.g. ``"pathogenic vs benign"``."""
    from hexamer.plots import plot_pr, plot_roc

    y = [label for label, _ in labelled]
    if len(set(y)) < 2:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    scores = [s for _, s in labelled]
    roc, pr = out_dir / f"{task.name}-roc.png", out_dir / f"{task.name}-pr.png"
    plot_roc(roc, {score: scores}, y, title=f"{task.title}: ROC ({classes})")
    plot_pr(pr, {score: scores}, y, title=f"{task.title}: precision-recall")
    return [roc, pr]


class DatasetSchemaError(ValueError):
    """A data file does not have the public dataset's columns; the message lists what was expected."""


@dataclass
class EvalContext:
    """What scoring needs besides the examples."""

    carbon: Carbon
    level: Level = "token"
    batch_size: int = 16
    options: Mapping[str, Any] = field(default_factory=dict)  # task options, e.g. {"window": 8192}
    notes: list[str] = field(
        default_factory=list
    )  # tasks add remarks for the report (e.g. a clipped context)

    def dna_fits(self, new_tokens: int = 0) -> int:
        """Bases of DNA a prompt can hold: whole k-mers in the model's context after the ``<dna>``
        token, leaving room for ``new_tokens`` generated ones."""
        return self.carbon.layout.k * (self.carbon.context_length - 1 - new_tokens)


class Task(ABC):
    """One published zero-shot task (see ``shared/spec/evals.md`` for each definition)."""

    name: ClassVar[str]  # CLI name, e.g. "brca2"
    title: ClassVar[str]  # human name, e.g. "BRCA2 VEP"
    headline: ClassVar[str]  # key of the metric the report leads with, e.g. "auroc"
    levels: ClassVar[tuple[Level, ...]] = ("token", "bp")  # scoring levels the task allows
    #: column name -> what it holds, shown in the error when a file does not match
    expected_columns: ClassVar[Mapping[str, str]] = {}
    #: published reference numbers: model -> {metric: value (fraction, not %)}
    reference: ClassVar[Mapping[str, Mapping[str, float]]] = {}
    #: where ``hexamer eval --suite all --data-root DATA`` looks for this task's data: paths relative
    #: to DATA (files or folders, the public dataset's own names), the first that exists is used
    data_candidates: ClassVar[tuple[str, ...]] = ()
    #: metric name -> key in the published script's summary JSON (e.g. ``"auroc": "AUROC"``); a
    #: metric ``"a.b"`` is nested as ``{"A": {"b": ...}}`` when ``"a"`` is mapped to ``"A"``
    summary_keys: ClassVar[Mapping[str, str]] = {}
    #: task options and their defaults (``hexamer eval --option key=value``); when set, only these
    #: keys reach the task and the cache key, other keys given on the command line are ignored
    default_options: ClassVar[Mapping[str, Any]] = {}

    def configure(self, options: Mapping[str, Any]) -> None:
        """Called by the runner with the task's options before :meth:`load` (e.g. which split to
        read); the same options reach :meth:`score` through :attr:`EvalContext.options`."""
        self.configured_options = dict(options)

    @abstractmethod
    def load(self, data: Path, *, limit: int | None = None, seed: int = 0) -> list[Example]:
        """Read the dataset file(s) at ``data`` (a file or a folder in the public layout)."""

    @abstractmethod
    def score(self, examples: list[Example], ctx: EvalContext) -> Iterator[Record]:
        """Yield one record per example (any order; the runner caches each as it arrives)."""

    @abstractmethod
    def metrics(self, records: list[Record]) -> dict[str, float]:
        """All metrics of this task from its records; must include :attr:`headline`."""

    def plots(self, records: list[Record], out_dir: Path) -> list[Path]:
        """Figures for the report (PNG); none by default."""
        return []
