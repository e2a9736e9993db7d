"""The ``hexamer`` command line: a thin layer over the Python API."""

from hexamer.cli import bench_cmd as _bench_cmd  # noqa: F401  (bench tokenizer/generate/throughput/fns/roofline/all)
from hexamer.cli import bench_design as _bench_design  # noqa: F401  (registers bench design-evolve)
from hexamer.cli import bench_finetune as _bench_finetune  # noqa: F401  (registers bench finetune)
from hexamer.cli import bench_gpu as _bench_gpu  # noqa: F401  (registers bench gpu)
from hexamer.cli import bench_pipelines as _bench_pipelines  # noqa: F401  (bench vep, bench embed, bench ism)
from hexamer.cli import bench_serve as _bench_serve  # noqa: F401  (registers bench serve)
from hexamer.cli import bench_spec as _bench_spec  # noqa: F401  (registers bench spec)
from hexamer.cli import design_cmd as _design_cmd  # noqa: F401  (registers design)
from hexamer.cli import eval_cmd as _eval_cmd  # noqa: F401  (registers eval)
from hexamer.cli import finetune_cmd as _finetune_cmd  # noqa: F401  (registers finetune)
from hexamer.cli import ism_cmd as _ism_cmd  # noqa: F401  (registers ism, calibrate)
from hexamer.cli import jobs as _jobs  # noqa: F401  (registers generate/score)
from hexamer.cli import niah_cmd as _niah_cmd  # noqa: F401  (registers build-niah)
from hexamer.cli import pipelines as _pipelines  # noqa: F401  (registers vep/embed)
from hexamer.cli import plot_cmd as _plot_cmd  # noqa: F401  (registers plot)
from hexamer.cli import predict_cmd as _predict_cmd  # noqa: F401  (registers predict)
from hexamer.cli import quantize_cmd as _quantize_cmd  # noqa: F401  (registers quantize, bench quant)
from hexamer.cli import serve_cmd as _serve_cmd  # noqa: F401  (registers serve)
from hexamer.cli import track_cmd as _track_cmd  # noqa: F401  (registers track)
from hexamer.cli.app import app, main
from hexamer.cli.train_cmd import register as _register_train

_register_train(app)

__all__ = ["app", "main"]
