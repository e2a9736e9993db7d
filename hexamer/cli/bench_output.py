"""Where a ``hexamer bench`` table goes besides the screen: ``--out`` (JSON, ``-`` for stdout), the
hidden old name ``--json``, ``--plot`` (PNG) and ``--price-per-hour`` (economics columns).

Those options are declared once here; :func:`bench_output` adds them to a command, which then
takes one :class:`BenchOutput` and ends with ``output.emit(report)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hexamer.cli.app import console, err_console
from hexamer.cli.checks import is_stdio, path_option
from hexamer.cli.option_groups import Command, option_group

if TYPE_CHECKING:
    from hexamer.bench.report import BenchReport

JsonOption = Annotated[
    Path | None, typer.Option("--out", "-o", help="Also write the table as JSON here (- for stdout).")
]
LegacyJsonOption = Annotated[Path | None, typer.Option("--json", hidden=True, help="Old name of --out.")]
PriceOption = Annotated[
    float | None,
    typer.Option(
        "--price-per-hour",
        min=0,
        help="Machine price in $ per hour: adds bp/hour and $ per Gbp columns (e.g. 2.5).",
    ),
]
#: why ``--plot -`` is refused
PLOT_WHY = "an image is written to a file (standard output carries the table or the JSON)"
#: the ``--plot`` help of the commands that draw the default bar chart
PLOT_HELP = "Also write a PNG bar chart here."


def plot_option(help_text: str) -> Any:
    """A ``--plot PATH`` option (PNG; ``-`` refused) with the command's own help."""
    return path_option(help_text, PLOT_WHY, "--plot")


def emit(
    report: BenchReport,
    json_out: Path | None,
    plot_out: Path | None,
    *,
    price_per_hour: float | None = None,
    draw: Callable[[BenchReport, Path], object] | None = None,
    **plot: Any,
) -> None:
    """Print the table (on stderr when ``json_out`` is ``-``: stdout then carries the JSON); add
    the throughput economics with a price; write JSON and the plot where asked. ``draw(report,
    path)`` draws a figure of the table's own making, from its rows before the price rows."""
    import json

    from hexamer.bench.report import add_economics, print_report

    if plot_out is not None and draw is not None:
        draw(report, plot_out)
    if price_per_hour is not None:
        add_economics(report, price_per_hour)
    to_stdout = is_stdio(json_out)
    screen = err_console if to_stdout else console
    print_report(report, screen)
    if to_stdout:
        print(json.dumps(report.as_dict(), default=str))
    elif json_out is not None:
        report.write_json(json_out)
        screen.print(f"wrote {json_out}")
    if plot_out is not None:
        if draw is None:
            from hexamer.bench.run_all import PLOTS

            report.plot(plot_out, **(plot or PLOTS[report.name]))
        screen.print(f"wrote {plot_out}")


@dataclass(frozen=True)
class BenchOutput:
    """The output options of one bench command, as given."""

    json_out: Path | None = None
    plot_out: Path | None = None
    price_per_hour: float | None = None

    def emit(
        self, report: BenchReport, draw: Callable[[BenchReport, Path], object] | None = None, **plot: Any
    ) -> None:
        """:func:`emit` with these options (``plot``: the chart's axes when not the table's default;
        ``draw``: a figure of the command's own)."""
        emit(report, self.json_out, self.plot_out, price_per_hour=self.price_per_hour, draw=draw, **plot)


#: no ``--out`` nor ``--plot``: the table on the screen (the default ``output`` of a command)
SCREEN_ONLY = BenchOutput()


def _bench_output(
    json_out: Path | None = None,
    plot_out: Path | None = None,
    legacy_json: Path | None = None,
    price_per_hour: float | None = None,
) -> BenchOutput:
    return BenchOutput(json_out or legacy_json, plot_out, price_per_hour)


def bench_output(plot: str | None = PLOT_HELP, *, legacy_json: bool = True) -> Callable[[Command], Command]:
    """Give a bench command ``--out``, ``--price-per-hour``, ``--plot`` (with this help; ``None``: no
    plot) and the hidden ``--json`` where its parameter ``output: BenchOutput`` stands (an
    :func:`~hexamer.cli.option_groups.option_group`)."""
    options: list[tuple[str, Any, Any]] = [("json_out", JsonOption, None)]
    if plot is not None:
        options.append(("plot_out", Annotated[Path | None, plot_option(plot)], None))
    if legacy_json:
        options.append(("legacy_json", LegacyJsonOption, None))
    options.append(("price_per_hour", PriceOption, None))
    return option_group("output", options, _bench_output)
