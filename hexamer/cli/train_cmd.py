"""``hexamer train``: the CLI face of :func:`hexamer.train.train`.

The options are generated from :class:`~hexamer.train.TrainConfig`'s fields (name, type, help), so
the CLI, the JSON config and the Python API can never drift apart. Precedence: defaults, then
``--config FILE.json``, then the options given on the command line.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from rich.console import Console
from rich.markup import escape

from hexamer.cli.checks import is_stdio
from hexamer.io.stdio import STDIO, spool_stdin

__all__ = ["config_from_cli", "register"]

_console = Console()
_err = Console(stderr=True, soft_wrap=True)

#: Fields that are not plain options: ``data`` is the positional argument, ``file_tags`` is
#: given as repeated ``--file-tag PATH=TAG``.
_SPECIAL = ("data", "file_tags")


_METAVARS: dict[Any, str] = {int: "INT", float: "FLOAT", str: "TEXT"}

#: Help panels: each starts at the named field and runs until the next one (field order).
_PANELS = (("val_data", "Data"), ("init", "Model"), ("steps", "Optimisation"), ("output_dir", "Run"))


def _panel(name: str) -> str:
    from hexamer.train.config import TrainConfig

    order = [f.name for f in dataclasses.fields(TrainConfig)]
    panel = _PANELS[0][1]
    for first, title in _PANELS:
        if order.index(name) >= order.index(first):
            panel = title
    return panel


def _option_type(name: str, hint: Any) -> tuple[Any, dict[str, Any]]:
    """(python type for typer, extra Option kwargs) for a TrainConfig field type."""
    args = [a for a in get_args(hint) if a is not type(None)]
    base = args[0] if get_origin(hint) in (typing.Union, types.UnionType) else hint
    if get_origin(base) is Literal:
        choices = [str(a) for a in get_args(base)]
        return enum.StrEnum(f"{name.title().replace('_', '')}Choice", {c: c for c in choices}), {}
    if get_origin(base) is list:
        return list[str], {"metavar": "PATH"}
    return base, {}


def _param(name: str, annotation: Any, default: Any = None, positional: bool = False) -> inspect.Parameter:
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if positional else inspect.Parameter.KEYWORD_ONLY
    return inspect.Parameter(name, kind, default=default, annotation=annotation)


def _parameters() -> list[inspect.Parameter]:
    from hexamer.train.config import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    params = [
        _param(
            "data",
            Annotated[
                list[str] | None,
                typer.Argument(
                    metavar="DATA...",
                    help="Training sequence files (FASTA/FASTQ/.txt/Parquet/TSV/CSV); - reads FASTA from "
                    "stdin (saved as OUTPUT_DIR/stdin-train.fa; resume with that path).",
                    show_default=False,
                ),
            ],
            positional=True,
        ),
        _param(
            "config_file",
            Annotated[
                Path | None,
                typer.Option(
                    "--config",
                    metavar="JSON",
                    help="TrainConfig options as JSON (CLI options win); - reads it from stdin.",
                ),
            ],
        ),
        _param(
            "file_tag",
            Annotated[
                list[str] | None,
                typer.Option(
                    "--file-tag",
                    metavar="PATH=TAG",
                    help="Tag for one data file (repeatable).",
                    rich_help_panel="Data",
                ),
            ],
        ),
    ]
    for f in dataclasses.fields(TrainConfig):
        if f.name in _SPECIAL:
            continue
        py_type, extra = _option_type(f.name, hints[f.name])
        flag = "--" + f.name.replace("_", "-")
        decls = [f"{flag}/--no-{flag[2:]}"] if py_type is bool else [flag]
        default = f.default if f.default is not dataclasses.MISSING else None
        help_text = escape(f.metadata.get("help", ""))
        if default not in (None, "", [], {}):
            help_text += escape(f" [default: {default}]")
        option = typer.Option(
            *decls,
            help=help_text,
            show_default=False,
            rich_help_panel=_panel(f.name),
            **{"metavar": _METAVARS.get(py_type), **extra},
        )
        params.append(_param(f.name, Annotated[py_type | None, option]))
    params += [
        _param(
            "print_config",
            Annotated[bool, typer.Option("--print-config", help="Print the resolved JSON config and exit.")],
            default=False,
        ),
        _param(
            "quiet", Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")], default=False
        ),
        _param(
            "as_json",
            Annotated[
                bool, typer.Option("--json", help="Print a one-line JSON summary on stdout (for scripts).")
            ],
            default=False,
        ),
    ]
    return params


def config_from_cli(values: dict[str, Any]) -> Any:
    """Resolve a :class:`TrainConfig` from parsed CLI values (``None`` = not given)."""
    from hexamer.train.config import TrainConfig

    config_file = values.pop("config_file", None)
    if is_stdio(config_file):
        base = config_from_stdin().to_dict()
    else:
        base = TrainConfig.from_json(config_file).to_dict() if config_file else TrainConfig().to_dict()
    data = values.pop("data", None)
    if data:
        base["data"] = list(data)
    tags = values.pop("file_tag", None)
    if tags:
        parsed = dict(base.get("file_tags") or {})
        for item in tags:
            path, sep, tag = item.partition("=")
            if not sep or not path:
                raise ValueError(f"--file-tag must be PATH=TAG, got {item!r}")
            parsed[path] = tag
        base["file_tags"] = parsed
    for name, value in values.items():
        if isinstance(value, enum.Enum):
            value = value.value
        if value is not None:
            base[name] = list(value) if isinstance(value, list | tuple) else value
    return TrainConfig.from_dict(base)


def config_from_stdin() -> Any:
    """``--config -``: a :class:`TrainConfig` from JSON on standard input."""
    import json
    import sys

    from hexamer.train.config import TrainConfig

    try:
        raw = json.loads(sys.stdin.read())
    except json.JSONDecodeError as exc:
        raise ValueError(f"--config - (standard input) is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"--config - (standard input) must hold a JSON object, got {type(raw).__name__}")
    try:
        return TrainConfig.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--config - (standard input): {exc}") from None


#: Where ``-`` training/validation data is kept, inside the run folder (``--resume`` reads it again).
STDIN_FILES = {"data": "stdin-train.fa", "val_data": "stdin-val.fa"}


def spool_stdin_data(config: Any, *, config_read_stdin: bool = False) -> Any:
    """``config`` with ``-`` in ``data``/``val_data`` replaced by a FASTA file in the run folder
    holding standard input (read several times over a run, and again on ``--resume``, so a pipe is
    saved once). Refuses ``-`` for the folders (``output_dir``, ``resume_from``) and more
    than one reader of standard input."""
    for name, why in (
        ("output_dir", "the run folder holds checkpoints and metrics"),
        ("resume_from", "a checkpoint is a folder"),
    ):
        if getattr(config, name) == STDIO:
            raise ValueError(f"--{name.replace('_', '-')} cannot be '-' (standard input/output): {why}")
    readers = [n for n in STDIN_FILES if STDIO in getattr(config, n)]
    count = sum(getattr(config, n).count(STDIO) for n in STDIN_FILES) + int(config_read_stdin)
    if count > 1:
        raise ValueError(
            "standard input ('-') can be read once: by one data file or by --config, not several"
        )
    if not readers:
        return config
    run = Path(config.output_dir)
    run.mkdir(parents=True, exist_ok=True)
    target = run / STDIN_FILES[readers[0]]
    tmp = target.with_name(f".{target.name}.tmp")
    if spool_stdin(tmp) == 0:
        tmp.unlink(missing_ok=True)
        raise ValueError("'-' was given as a data file but standard input is empty")
    tmp.replace(target)
    changes: dict[str, Any] = {
        readers[0]: [str(target) if p == STDIO else p for p in getattr(config, readers[0])]
    }
    if STDIO in (config.file_tags or {}):
        tags = dict(config.file_tags)
        tags[str(target)] = tags.pop(STDIO)
        changes["file_tags"] = tags
    return dataclasses.replace(config, **changes)


def register(app: typer.Typer) -> None:
    """Add the ``train`` command to ``app``."""

    def train_command(**values: Any) -> None:
        from hexamer.cli.app import fail, print_json
        from hexamer.io import SequenceInputError
        from hexamer.train import train
        from hexamer.train.curves import CURVES_FILE
        from hexamer.train.trainer import METRICS_FILE

        stdin_config = values.get("config_file")
        print_config = values.pop("print_config", False)
        quiet = values.pop("quiet", False)
        as_json = values.pop("as_json", False)
        try:
            config = config_from_cli(values)
        except (ValueError, FileNotFoundError, TypeError) as exc:
            fail(exc)
        if print_config:
            print(config.to_json())  # plain JSON: Rich would colour and wrap it
            return
        if not config.data:
            fail("give training files as arguments or 'data' in --config")
        try:
            config = spool_stdin_data(config, config_read_stdin=is_stdio(stdin_config))
        except ValueError as exc:
            fail(exc)
        try:
            result = train(config, progress=not (quiet or as_json), console=_err if as_json else _console)
        except (ValueError, FileNotFoundError, SequenceInputError) as exc:
            fail(exc)
        val = result.last_validation
        curves = result.output_dir / CURVES_FILE
        if as_json:
            print_json(
                {
                    "step": result.step,
                    "final_loss": result.final_loss,
                    "val_accuracy": val["val_accuracy"] if val else None,
                    "model": str(result.final_dir or result.checkpoint),
                    "metrics": str(result.output_dir / METRICS_FILE),
                    "curves": str(curves) if curves.is_file() else None,
                    "train_seconds": result.train_seconds,
                    "bases_per_second": result.bases_per_second,
                }
            )
            return
        acc = f", held-out per-base accuracy {val['val_accuracy']:.4f}" if val else ""
        _console.print(
            f"step {result.step}: loss {result.final_loss:.4f}{acc}; "
            f"{result.train_seconds:.0f} s training, {result.bases_per_second:,.0f} bp/s"
        )
        where = result.final_dir or result.checkpoint
        _console.print(f"model: {where}")
        if curves.is_file():
            _console.print(f"curves: {curves}")

    params = _parameters()
    train_command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    train_command.__annotations__ = {p.name: p.annotation for p in params}
    app.command(
        "train",
        help="Train or fine-tune a Carbon-format model with token CE then FNS (see docs/training.md).",
        no_args_is_help=True,
    )(train_command)
