"""``option_group``: options declared once, put in place of one parameter, handed over as one value."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import pytest
import typer
from typer.testing import CliRunner

from hexamer.cli.option_groups import FILLED, option_group

if TYPE_CHECKING:
    from fractions import Fraction  # a type the module does not import when it runs

IntOption = Annotated[int, typer.Option(min=0, max=9)]

pair = option_group("pair", (("a", IntOption, 1), ("b", IntOption, 2)), lambda a, b: (a, b))
ratio = option_group("ratio", (("num", IntOption, 1), ("den", IntOption, 3)), lambda num, den: f"{num}/{den}")


def test_two_groups_stack_in_place_and_keep_the_other_options() -> None:
    seen: list = []
    app = typer.Typer(add_completion=False)

    @app.command()
    @pair
    @ratio
    def cmd(
        first: Annotated[str, typer.Option()] = "x",
        pair: tuple[int, int] = FILLED,
        ratio: Fraction = FILLED,  # only known to type checkers: left as text until replaced
        last: Annotated[bool, typer.Option("--last/--no-last")] = False,
    ) -> None:
        seen.append((first, pair, ratio, last))

    names = [p.name for p in typer.main.get_command(app).params]
    assert names == ["first", "a", "b", "num", "den", "last"]
    assert CliRunner().invoke(app, ["--b", "5", "--den", "7", "--last"]).exit_code == 0
    assert seen == [("x", (1, 5), "1/7", True)]
    assert CliRunner().invoke(app, ["--a", "10"]).exit_code == 2  # the group's ranges hold


def test_a_command_without_the_parameter_is_refused() -> None:
    def cmd(model: str | None = None) -> None: ...

    with pytest.raises(TypeError, match="no 'pair' parameter"):
        pair(cmd)


def test_a_call_from_python_may_leave_the_group_at_its_defaults() -> None:
    @pair
    def cmd(pair: tuple[int, int] = FILLED) -> tuple[int, int]:
        return pair

    assert cmd() == (1, 2) and cmd(b=4) == (1, 4)
