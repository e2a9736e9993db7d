"""The ``--ray`` option group: one ``RayRun`` (None without ``--ray``), each command's own ``--shard-records``."""

from __future__ import annotations

from typing import Annotated

import pytest
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


def test_pool_is_the_pool_spec_of_the_actors() -> None:
    pytest.importorskip("ray")
    from hexamer.distributed import PoolSpec

    got = RayRun("ray://head:10001", 4, None, 1.0).pool(threads=None, dtype="bfloat16", device=None)
    assert got == PoolSpec(workers=4, address="ray://head:10001", threads=1, num_gpus=1.0, dtype="bfloat16")
    assert RayRun("auto", 2).pool(threads=3, dtype="auto", device="cpu").threads == 3


def test_pool_out_of_range_is_a_usage_error() -> None:
    pytest.importorskip("ray")
    with pytest.raises(typer.Exit):
        RayRun("auto", 2).pool(threads=100_000, dtype="auto", device=None)
