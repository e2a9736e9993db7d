"""One shape of progress bar for every long job (scoring, generation, evaluation, training):
title, bar, done/total, the job's own fields, time elapsed and left."""

from __future__ import annotations

from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["progress_bar"]


def progress_bar(title: str, *fields: str, console: Any = None, **options: Any) -> Progress:
    """A rich :class:`~rich.progress.Progress`: ``title`` and each of ``fields`` are text columns
    (rich markup over the task, e.g. ``"{task.fields[rate]}"``) around the bar and the count;
    ``options`` go to ``Progress`` (``transient``, ``disable``)."""
    return Progress(
        TextColumn(title),
        BarColumn(),
        MofNCompleteColumn(),
        *(TextColumn(f) for f in fields),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        **options,
    )
