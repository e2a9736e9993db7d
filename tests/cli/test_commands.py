"""The CLI stays thin: every command function is short, and every command declares each option once
(an option group such as ``--ray`` or ``--server`` is declared in its own module, never again by a
command that takes it)."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

import hexamer.cli

CLI = Path(hexamer.cli.__file__).resolve().parent
#: the most lines a command function may have, from ``def`` to its last line (signature included)
MAX_COMMAND_LINES = 80


def _is_command(decorator: ast.expr) -> bool:
    """``@app.command()``, ``@bench_app.command("vep")``, ..."""
    return (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == "command"
    )


def command_functions(folder: Path = CLI) -> Iterator[tuple[str, ast.FunctionDef]]:
    """``(where, function)`` of every typer command in ``folder``: the functions decorated with
    ``X.command(...)`` and those registered as ``X.command(...)(function)``."""
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        registered = {
            arg.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and _is_command(node.func)
            for arg in node.args
            if isinstance(arg, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and (
                any(_is_command(d) for d in node.decorator_list) or node.name in registered
            ):
                yield f"{path.relative_to(folder.parent.parent)}:{node.lineno} {node.name}", node


def test_the_command_finder_sees_every_registered_command() -> None:
    """The AST finds as many command functions as the app registers (none escapes the length rule)."""
    found = {node.name for _, node in command_functions()}
    assert {"vep", "predict", "finetune", "generate", "train_command", "bench_vep_cmd"} <= found
    assert len(found) >= len(list(_commands(typer.main.get_command(hexamer.cli.app))))


def test_every_command_function_is_at_most_80_lines() -> None:
    lengths = {where: node.end_lineno - node.lineno + 1 for where, node in command_functions()}
    assert lengths, "no command found"
    too_long = {where: n for where, n in lengths.items() if n > MAX_COMMAND_LINES}
    assert not too_long, f"move work into library functions or option groups: {too_long}"


def _commands(group: Any, prefix: str = "hexamer") -> Iterator[tuple[str, Any]]:
    """``(command line, command)`` of every command under ``group`` (typer's own click objects)."""
    if hasattr(group, "commands"):
        for name, sub in group.commands.items():
            yield from _commands(sub, f"{prefix} {name}")
    else:
        yield prefix, group


def test_every_command_declares_each_option_once() -> None:
    """No option string (``--ray``, ``-m``, ...) and no parameter appears twice in one command:
    a ``--ray`` command takes its scale-out options from the group, not again in its own list."""
    commands = dict(_commands(typer.main.get_command(hexamer.cli.app)))
    assert "hexamer vep" in commands and "hexamer bench vep" in commands
    with_ray = [name for name, cmd in commands.items() if any("--ray" in p.opts for p in cmd.params)]
    assert {"hexamer vep", "hexamer ism", "hexamer score", "hexamer embed", "hexamer generate"} <= set(
        with_ray
    )
    for name, command in commands.items():
        flags = Counter(flag for p in command.params for flag in (*p.opts, *p.secondary_opts))
        params = Counter(p.name for p in command.params)
        assert not [f for f, n in flags.items() if n > 1], f"{name} declares an option twice: {flags}"
        assert not [p for p, n in params.items() if n > 1], f"{name} has a parameter twice: {params}"
