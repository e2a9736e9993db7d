"""hexamer.progress: the one progress-bar shape of long jobs."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from hexamer.progress import progress_bar


def test_progress_bar_puts_the_job_fields_between_the_count_and_the_times() -> None:
    bar = progress_bar(
        "[bold]x", "{task.fields[rate]}", "lr {task.fields[lr]}", console=Console(file=io.StringIO())
    )
    kinds = [type(c) for c in bar.columns]
    assert kinds == [
        TextColumn,
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    ]
    assert [c.text_format for c in bar.columns if isinstance(c, TextColumn)] == [
        "[bold]x",
        "{task.fields[rate]}",
        "lr {task.fields[lr]}",
    ]


def test_progress_bar_passes_options_to_rich() -> None:
    assert progress_bar("x", disable=True).disable
