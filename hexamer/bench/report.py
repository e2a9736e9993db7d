"""One table format for every ``hexamer bench`` command: printed with rich, saved as JSON, plotted.

A benchmark fills a :class:`BenchReport` (rows are plain dicts) and hands it to :func:`emit`, so
every table carries the machine it ran on and the command that produced it, and every plot looks
alike. Ratios are always against a peer measured in the same run.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hexamer.machine import machine_info


@dataclass
class BenchReport:
    """A benchmark's result: ``rows`` of dicts whose keys include every name in ``columns``.

    ``formats`` maps a column to a format spec (``"{:,.1f}"``); ``notes`` are printed under the
    table (ratios, skipped backends and why).
    """

    name: str
    title: str
    columns: Sequence[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    command: str = field(default_factory=lambda: " ".join(["hexamer", *sys.argv[1:]]))
    machine: dict[str, Any] = field(default_factory=machine_info)

    def cell(self, row: dict[str, Any], column: str) -> str:
        value = row.get(column)
        if value is None:
            return "—"
        spec = self.formats.get(column)
        if spec is not None and isinstance(value, int | float):
            return spec.format(value)
        if isinstance(value, float):
            return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        return str(value)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "command": self.command,
            "machine": self.machine,
            "columns": list(self.columns),
            "rows": self.rows,
            "notes": self.notes,
        }

    def to_markdown(self) -> str:
        """The table as Markdown, for docs/benchmarks.md."""
        head = "| " + " | ".join(self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(self.cell(r, c) for c in self.columns) + " |" for r in self.rows]
        return "\n".join([head, rule, *body])

    def write_json(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=2, default=str))
        tmp.replace(path)
        return path

    def plot(self, path: Path, *, x: str, y: str, group: str | None = None, log_y: bool = False) -> Path:
        """Grouped bar chart of ``y`` per ``x`` (one bar colour per ``group`` value), saved as PNG/SVG."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        xs = list(dict.fromkeys(str(r.get(x)) for r in self.rows))
        groups = list(dict.fromkeys(str(r.get(group)) for r in self.rows)) if group else [y]
        width = 0.8 / max(1, len(groups))
        fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(xs) * max(1, len(groups)) ** 0.5), 3.6))
        for gi, g in enumerate(groups):
            values = []
            for xv in xs:
                match = [
                    r for r in self.rows if str(r.get(x)) == xv and (group is None or str(r.get(group)) == g)
                ]
                v = match[0].get(y) if match else None
                values.append(float(v) if isinstance(v, int | float) else 0.0)
            pos = [i + (gi - (len(groups) - 1) / 2) * width for i in range(len(xs))]
            ax.bar(pos, values, width=width, label=g if group else None)
        ax.set_xticks(range(len(xs)), xs, rotation=20 if max(map(len, xs), default=0) > 8 else 0)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        if log_y:
            ax.set_yscale("log")
        ax.set_title(textwrap.fill(self.title, 80), fontsize=9)
        if group:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return path


#: throughput columns: unit -> (amount of that unit per one of the column's, the amount priced, its name)
RATE_UNITS: dict[str, tuple[float, float, str]] = {
    "bp/s": (1.0, 1e9, "Gbp"),
    "kbp/s": (1e3, 1e9, "Gbp"),
    "Mbp/s": (1e6, 1e9, "Gbp"),
    "variants/s": (1.0, 1e6, "million variants"),
    "sequences/s": (1.0, 1e6, "million sequences"),
}


def _rate_column(report: BenchReport) -> tuple[str, str] | None:
    """The report's throughput column and its unit (``spec bp/s`` is in bp/s): the last one, so a
    table comparing a baseline with an improvement prices the improvement."""
    found = None
    for column in report.columns:
        for unit in RATE_UNITS:
            if column == unit or column.endswith(" " + unit):
                found = (column, unit)
    return found


def add_economics(report: BenchReport, price_per_hour: float) -> BenchReport:
    """Throughput economics at a machine price of ``price_per_hour`` dollars: for every row with a
    rate, the work per hour (``bp/hour``) and the dollars per Gbp (or per million variants /
    sequences for tables that count those). ``hexamer bench serve``'s metric table gets the same
    as two more rows. Tables without a rate get a note saying so."""
    import math

    if not (
        isinstance(price_per_hour, int | float) and math.isfinite(price_per_hour) and price_per_hour >= 0
    ):
        raise ValueError(f"price_per_hour must be a finite number >= 0, got {price_per_hour!r}")
    found = _rate_column(report)
    if found is None and "metric" in report.columns and "value" in report.columns:
        for row in list(report.rows):
            if str(row.get("metric", "")).endswith("(bp/s)") and isinstance(row.get("value"), int | float):
                per_hour = float(row["value"]) * 3600
                report.rows.append(
                    {"metric": "Output per hour (bp)", "key": "output_bp_per_hour", "value": per_hour}
                )
                cost = price_per_hour / per_hour * 1e9 if per_hour > 0 else None
                report.rows.append(
                    {"metric": f"$ per Gbp at ${price_per_hour:g}/hour", "key": "usd_per_gbp", "value": cost}
                )
                report.notes.append(
                    f"$ per Gbp = price per hour / bp per hour × 1e9 (${price_per_hour:g}/hour)"
                )
                return report
    if found is None:
        report.notes.append(
            f"--price-per-hour: this table has no throughput column to price (${price_per_hour:g}/hour)"
        )
        return report
    column, unit = found
    scale, priced, name = RATE_UNITS[unit]
    what = "bp" if unit.endswith("bp/s") else unit.removesuffix("/s")
    hour_col, cost_col = f"{what}/hour", f"$ per {name}"
    report.columns = [*report.columns, hour_col, cost_col]
    report.formats.setdefault(hour_col, "{:,.4g}")
    report.formats.setdefault(cost_col, "${:,.4g}")
    for row in report.rows:
        rate = row.get(column)
        if isinstance(rate, int | float) and rate > 0:
            per_hour = float(rate) * scale * 3600
            row[hour_col], row[cost_col] = per_hour, price_per_hour / per_hour * priced
        else:
            row[hour_col] = row[cost_col] = None
    report.notes.append(
        f"{cost_col} = price per hour / ({column} × 3600{f' × {scale:g}' if scale != 1 else ''}) "
        f"× {priced:g}, at ${price_per_hour:g}/hour"
    )
    return report


def print_report(report: BenchReport, console: Any | None = None) -> None:
    """Print the table and its notes with rich (their text shown as is: ``[bench]`` is not markup)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    table = Table(title=escape(report.title))
    for i, col in enumerate(report.columns):
        table.add_column(escape(col), justify="left" if i == 0 else "right")
    for row in report.rows:
        table.add_row(*(escape(report.cell(row, c)) for c in report.columns))
    console.print(table)
    for note in report.notes:
        console.print(escape(note))
