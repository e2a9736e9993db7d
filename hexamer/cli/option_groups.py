"""Option groups: options several commands share, declared once and handed to a command as one
value (``hexamer.cli.server_options``: the ``--server`` group; ``hexamer.cli.ray_options``: the
``--ray`` group; ``hexamer.cli.ism_cmd``: the recipe settings; ``hexamer.cli.bench_output``: where a
bench table goes).

typer reads a command's options from its parameters, so a group is a decorator that puts the
group's options in place of one parameter of the command (same position: ``--help`` lists them
there) and calls the command with the value ``build`` makes of them."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["FILLED", "Command", "option_group"]

Command = TypeVar("Command", bound=Callable[..., Any])

#: The default of a group's parameter in the command's own signature (``settings: VepSettings =
#: FILLED``): the decorator always passes the value, Python wants a default after defaulted ones.
FILLED: Any = None


def option_group(
    parameter: str, options: Sequence[tuple[str, Any, Any]], build: Callable[..., Any]
) -> Callable[[Command], Command]:
    """A decorator (apply below ``@app.command()``) that replaces the command's ``parameter`` by
    ``options``, each ``(name, Annotated option type, default)``, and passes it
    ``build(**values of the options)``."""
    defaults = {name: default for name, _, default in options}

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command)
        if parameter not in signature.parameters:
            raise TypeError(f"{command.__name__} has no {parameter!r} parameter for its option group")
        parameters: list[inspect.Parameter] = []
        for each in signature.parameters.values():
            if each.name != parameter:
                parameters.append(_evaluated(each, command))
                continue
            parameters.extend(
                inspect.Parameter(name, each.kind, annotation=annotation, default=default)
                for name, annotation, default in options
            )

        @functools.wraps(command)
        def with_group(**values: Any) -> Any:
            # typer gives every option; a call from Python may leave some at their defaults
            group = {name: values.pop(name, default) for name, default in defaults.items()}
            return command(**values, **{parameter: build(**group)})

        with_group.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_group.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_group  # type: ignore[return-value]

    return decorate


def _evaluated(parameter: inspect.Parameter, command: Callable[..., Any]) -> inspect.Parameter:
    """``parameter`` with its annotation evaluated in the command's module, as typer reads it
    (``from __future__ import annotations`` keeps them as text). A group's own parameter may name
    a type imported for type checking only: that one stays text until its group replaces it
    (were it an option, typer would fail on it when the app is built)."""
    if not isinstance(parameter.annotation, str):
        return parameter
    try:
        annotation = eval(parameter.annotation, command.__globals__)
    except NameError:
        return parameter
    return parameter.replace(annotation=annotation)
