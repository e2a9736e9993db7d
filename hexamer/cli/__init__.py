"""The ``hexamer`` command line: a thin layer over the Python API."""

from hexamer.cli import bench_pipelines as _bench_pipelines  # noqa: F401  (bench vep, bench embed)
from hexamer.cli import jobs as _jobs  # noqa: F401  (registers generate/score)
from hexamer.cli import pipelines as _pipelines  # noqa: F401  (registers vep/embed/plot)
from hexamer.cli.app import app, main
from hexamer.cli.train_cmd import register as _register_train

_register_train(app)

__all__ = ["app", "main"]
