"""The ``--ray`` option group: one ``RayRun`` (None without ``--ray``), each command's own ``--shard-records``."""

from __future__ import annotations

from typing import Annotated

import typer
from typer.testing import CliRunner

from hexamer.cli.ray_options import RayRun, ray_options


def _app(seen: list) -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.command()
    @ray_options(Annotated[int | None, typer.Option(min=1, max=10, help="--ray: shards.")])
    def cmd(ray: RayRun | None = None, resume: Annotated[bool, typer.Option()] = False) -> None:
        seen.append((ray, resume))

    return app


def test_the_group_stands_where_the_ray_parameter_was() -> None:
    params = typer.main.get_command(_app([])).params
    assert [p.name for p in params] == ["ray", "workers", "shard_records", "num_gpus_per_worker", "resume"]
    assert params[2].help == "--ray: shards."


def test_the_command_gets_one_ray_run_or_none() -> None:
    seen: list = []
    app = _app(seen)
    args = ["--ray", "auto", "--workers", "3", "--shard-records", "4", "--num-gpus-per-worker", "0.5"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert seen[-1] == (RayRun("auto", 3, 4, 0.5), False)
    assert CliRunner().invoke(app, ["--workers", "3", "--resume"]).exit_code == 0
    assert seen[-1] == (None, True)
    assert CliRunner().invoke(app, ["--ray", "auto", "--shard-records", "11"]).exit_code == 2  # its own range


def test_scale_out_names_the_options_as_scaleout_takes_them() -> None:
    got = RayRun("ray://head:10001", 4, None, 1.0).scale_out()
    assert got == {"workers": 4, "shard_records": None, "num_gpus": 1.0}
