"""``hexamer plot``: the figure of a score table (:func:`hexamer.plots.plot_table`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from hexamer.cli.app import JsonFlag, app, console, describe_counts, err_console, fail, print_json
from hexamer.cli.checks import is_stdio
from hexamer.io.stdio import copy_to_stdout


@app.command()
def plot(
    kind: Annotated[
        Literal["hist", "roc", "pr"], typer.Argument(help="hist (distribution), roc or pr (against labels).")
    ],
    table: Annotated[
        Path,
        typer.Argument(
            help="A score table (.parquet/.tsv/.csv/.jsonl) from hexamer vep or score; - reads standard "
            "input (with --format)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help=".png, .svg or .pdf; - writes PNG to stdout.")],
    table_format: Annotated[
        Literal["parquet", "tsv", "csv", "jsonl"] | None,
        typer.Option(
            "--format",
            help="The table's format: needed when it is read from standard input, else its extension.",
        ),
    ] = None,
    score_col: Annotated[str, typer.Option(help="Column holding the scores.")] = "score",
    label_col: Annotated[
        str | None, typer.Option(help="Label column (roc, pr): 0/1, or any values with --positive.")
    ] = None,
    positive: Annotated[
        str | None,
        typer.Option(help="roc, pr: the label value of the positive class, e.g. pathogenic."),
    ] = None,
    by: Annotated[str | None, typer.Option(help="hist: one histogram per value of this column.")] = None,
    negate: Annotated[
        bool,
        typer.Option(
            "--negate/--no-negate", help="Use -score (window scores are negative for damaging alts)."
        ),
    ] = False,
    title: Annotated[str | None, typer.Option(help="Figure title (default: says what is drawn).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Score distribution, or ROC / PR curves against labels."""
    from hexamer import plots

    if is_stdio(table) and table_format is None:
        raise typer.BadParameter(
            "a table read from standard input ('-') needs --format (parquet, tsv, csv or jsonl)"
        )
    if is_stdio(out) and as_json:
        raise typer.BadParameter("--out - writes the image to standard output; drop --json (or give a file)")
    if kind != "hist" and label_col is None:
        raise typer.BadParameter(f"{kind} needs --label-col")
    shown = "standard input" if is_stdio(table) else str(table)
    data = _read_score_table(table, table_format, shown)
    with tempfile.TemporaryDirectory(prefix="hexamer-plot-") as spool:
        target = Path(spool) / "plot.png" if is_stdio(out) else out  # "-o -": PNG on stdout
        try:
            drawn = plots.plot_table(
                kind,
                data,
                target,
                score_col=score_col,
                label_col=label_col,
                positive=positive,
                by=by,
                negate=negate,
                title=title,
            )
        except ValueError as exc:
            fail(f"{shown}: {exc}")
        if is_stdio(out):
            copy_to_stdout(target)
    summary = {"output": str(out), "kind": kind, **drawn}
    if as_json:
        return print_json(summary)
    screen = err_console if is_stdio(out) else console
    if kind == "hist":
        screen.print(f"wrote {out} (plotted scores per group: {describe_counts(drawn['counts'])})")
    else:
        shown_value = f"{drawn['metric']} {drawn['value']:.4f}, n = {drawn['n']:,}"
        screen.print(f"wrote {out} ({shown_value}, positive: {drawn['positive']})")


def _read_score_table(table: Path, table_format: str | None, shown: str) -> Any:
    """The table (``-``: standard input in ``table_format``); a name whose format cannot be told
    is a usage error, a file that cannot be read an error naming it."""
    from hexamer.io import table_format as format_of
    from hexamer.io.tables import read_table

    try:  # the format first: a name it cannot tell is a usage error, a bad file is not
        format_of("" if is_stdio(table) else table, table_format)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'TABLE'") from None
    try:
        return read_table(table, table_format)
    except Exception as exc:
        fail(f"cannot read {shown}: {exc}")
