"""The ``--server`` option group, declared once and put in place of a command's ``server`` parameter."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from hexamer.cli import server_options as served


def _app(seen: list) -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command()
    @served.server_options
    def cmd(
        first: Annotated[int, typer.Option()] = 1,
        server: served.Server | None = None,
        last: Annotated[bool, typer.Option("--last/--no-last")] = False,
    ) -> None:
        seen.append((first, server, last))

    return app


def _option_names(app: typer.Typer) -> list[str]:
    return [p.name for p in typer.main.get_command(app).params]


def test_the_group_stands_where_the_server_parameter_was() -> None:
    names = _option_names(_app([]))
    assert names == ["first", "server", "served_model", "api_key", "tokenizer", "top_n", "last"]


def test_the_command_gets_one_server_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HEXAMER_API_KEY", raising=False)
    seen: list = []
    app = _app(seen)
    args = ["--server", "http://h:8000", "--served-model", "m", "--api-key", "k", "--tokenizer", "t"]
    assert CliRunner().invoke(app, [*args, "--top-n", "5", "--first", "3"]).exit_code == 0
    assert seen[-1] == (3, served.Server("http://h:8000", "m", "k", "t", 5), False)
    assert CliRunner().invoke(app, ["--served-model", "m", "--last"]).exit_code == 0
    assert seen[-1] == (1, None, True)  # without --server the group's other options mean nothing
    result = CliRunner().invoke(app, ["--server", "u", "--top-n", "0"])
    assert result.exit_code == 2 and seen[-1] == (1, None, True)  # --top-n is range-checked


def test_api_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEXAMER_API_KEY", "secret")
    seen: list = []
    assert CliRunner().invoke(_app(seen), ["--server", "u"]).exit_code == 0
    assert seen[-1][1] == served.Server("u", api_key="secret")


def test_a_command_without_a_server_parameter_is_refused() -> None:
    def cmd(model: str | None = None) -> None: ...

    with pytest.raises(TypeError, match="no 'server' parameter"):
        served.server_options(cmd)
