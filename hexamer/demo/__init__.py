"""The built-in demo model: a small Carbon-format model trained on real DNA, shipped with hexamer.

It exists so that ``hexamer demo``/``generate``/``score`` and the examples produce DNA-like output
without a download: 5.5 M parameters (11 MB in float16), trained for about 0.9 CPU-hours with
``hexamer train --copy-circuit`` on the sequences in ``hexamer/data/dna`` and copy pairs, so it
copies from its context (provenance, commands and held-out accuracy beside Markov baselines:
``hexamer/data/demo-model/README.md``). It is not Carbon and says
nothing about Carbon's quality. :func:`run_demo` (``hexamer demo``) is the guided tour.
"""

from __future__ import annotations

from hexamer.demo.paths import demo_data_files, demo_model_path
from hexamer.lazy import lazy_getattr

__all__ = ["DemoResult", "demo_data_files", "demo_model_path", "run_demo"]


# run_demo/DemoResult load torch and the model code: imported only when asked.
__getattr__ = lazy_getattr(
    "hexamer.demo", {"run_demo": "hexamer.demo.story", "DemoResult": "hexamer.demo.story"}
)
