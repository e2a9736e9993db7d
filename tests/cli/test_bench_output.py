"""The output options every bench command shares reach the command as one BenchOutput."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hexamer.cli.bench_output import SCREEN_ONLY, BenchOutput, bench_output


def _app(**options: object) -> tuple[typer.Typer, list[tuple[int, BenchOutput]]]:
    seen: list[tuple[int, BenchOutput]] = []
    app = typer.Typer()

    @app.command()
    @bench_output(**options)  # type: ignore[arg-type]
    def cmd(size: int = 1, output: BenchOutput = SCREEN_ONLY) -> None:
        seen.append((size, output))

    return app, seen


def test_options_build_one_bench_output(tmp_path: Path) -> None:
    app, seen = _app()
    args = ["--size", "3", "-o", str(tmp_path / "t.json"), "--plot", str(tmp_path / "t.png")]
    assert CliRunner().invoke(app, [*args, "--price-per-hour", "2.5"]).exit_code == 0
    assert seen[-1] == (3, BenchOutput(tmp_path / "t.json", tmp_path / "t.png", 2.5))
    assert CliRunner().invoke(app, ["--json", "old.json"]).exit_code == 0  # the old name of --out
    assert seen[-1] == (1, BenchOutput(Path("old.json")))
    assert CliRunner().invoke(app, []).exit_code == 0
    assert seen[-1] == (1, SCREEN_ONLY)


def test_plot_and_old_name_can_be_left_out() -> None:
    app, seen = _app(plot=None, legacy_json=False)
    for gone in ("--plot", "--json"):
        assert CliRunner().invoke(app, [gone, "x"]).exit_code == 2
    assert CliRunner().invoke(app, ["--plot", "-"]).exit_code == 2 and not seen


def test_plot_refuses_stdout_and_price_is_range_checked() -> None:
    app, seen = _app()
    assert CliRunner().invoke(app, ["--plot", "-"]).exit_code == 2
    assert CliRunner().invoke(app, ["--price-per-hour", "-1"]).exit_code == 2
    assert not seen


def test_a_command_without_output_is_refused() -> None:
    def cmd(size: int = 1) -> None: ...

    with pytest.raises(TypeError, match="output"):
        bench_output()(cmd)
