"""Genome-NIAH cells: config names (``niah_neardup_d2_8k``), context labels, and where a cell's
files are in the Hub dataset's layout (one folder per cell, or a single file)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hexamer.evals.data import TABLE_SUFFIXES

__all__ = ["DIFFICULTIES", "cell_name", "ctx_label", "find_cells", "parse_cell", "parse_ctx", "task_of_row"]

#: task names from easiest to hardest (heat-map rows)
DIFFICULTIES = ("niah", "neardup_d4", "neardup_d2", "neardup_d1")
_CELL = re.compile(r"^niah(?:_(neardup_d\d+))?_(\d+k?)$")


def parse_ctx(text: str | int) -> int:
    """Context in tokens from ``"4k"`` (4,096), ``"64k"`` or a plain number."""
    s = str(text).strip().lower()
    try:
        return int(s[:-1]) * 1024 if s.endswith("k") else int(s)
    except ValueError:
        raise ValueError(f"context {text!r} must be a token count such as 4k, 64k or 4096") from None


def ctx_label(tokens: int) -> str:
    """The config label of a context: ``4k`` for 4,096 tokens, the number itself otherwise."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def cell_name(task: str, ctx_tokens: int) -> str:
    """Config name of a cell: ``niah_4k``, ``niah_neardup_d2_64k``."""
    return f"niah_{ctx_label(ctx_tokens)}" if task == "niah" else f"niah_{task}_{ctx_label(ctx_tokens)}"


def parse_cell(name: str) -> tuple[str, int] | None:
    """(task, context tokens) of a config name, None when the name is not one."""
    m = _CELL.match(name)
    if not m:
        return None
    return (m.group(1) or "niah"), parse_ctx(m.group(2))


def _is_table(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz").removesuffix(".bz2")
    return any(name.endswith(s) for s in TABLE_SUFFIXES)


def _split_files(folder: Path) -> list[Path]:
    tables = sorted(p for p in folder.iterdir() if p.is_file() and _is_table(p))
    test = [p for p in tables if re.match(r"test([-_.]|$)", p.name)]
    return test or tables


def find_cells(data: Path) -> list[tuple[str | None, list[Path]]]:
    """(config name or None, files) for every cell at ``data`` (see the module docstring)."""
    if data.is_file():
        for name in (data.parent.name, data.name.split(".")[0]):
            if parse_cell(name):
                return [(name, [data])]
        return [(None, [data])]
    if not data.is_dir():
        raise FileNotFoundError(f"Genome-NIAH: {data} does not exist")
    if parse_cell(data.name):
        return [(data.name, _split_files(data))]
    cells: list[tuple[str | None, list[Path]]] = []
    for root in (data, data / "data"):
        if root.is_dir():
            for sub in sorted(root.iterdir()):
                if sub.is_dir() and parse_cell(sub.name):
                    files = _split_files(sub)
                    if files:
                        cells.append((sub.name, files))
    if cells:
        return cells
    files = _split_files(data)
    if files:
        return [(None, files)]
    raise FileNotFoundError(
        f"Genome-NIAH: no cell folders (niah_4k, niah_neardup_d2_8k, ...) or data files under {data}"
    )


def task_of_row(row: dict[str, Any]) -> str:
    """The task of a row from a file with no config name: its ``task`` column, else its uid."""
    task = row.get("task")
    if isinstance(task, str) and task:
        return task.removeprefix("niah_") if task != "niah" else task
    uid = str(row.get("uid", ""))
    m = re.search(r"neardup_d\d+", uid)
    return m.group(0) if m else "niah"
