"""llama.cpp as hexamer's CPU peer: GGUF conversion, a parity gate, and a batched DNA generator.

llama.cpp (through ``llama-cpp-python==0.3.36``, the ``bench`` extra) runs Carbon natively: its
vendored revision knows the ``hybriddna`` tokenizer. This package puts it on the same footing as
hexamer in ``hexamer bench``: the same folder (converted once to GGUF by llama.cpp's own
``convert_hf_to_gguf.py``), the same prompts, the same thread count, the same number of new bases,
sampling restricted to the 4,096 6-mer tokens. Nothing here is needed by hexamer itself, and every
entry point reports cleanly when llama.cpp is absent.

Stable interface (``hexamer bench`` imports it)::

    backend = LlamaCppBackend(folder, dtype="float32")   # cheap: nothing is loaded yet
    ok, why = backend.available()                         # (False, "llama-cpp-python is not installed ...")
    parity = backend.check_parity(carbon, prompts)        # ParityReport; raises ParityError beyond tolerance
    texts, timings = backend.generate(prompts, new_bp, batch=16, temperature=1.0, seed=0)
    backend.close()

    convert_to_gguf(folder, out_path=None, outtype="f32")  # -> Path (cached next to the folder)
    quantized_gguf(folder, "q8_0")                          # -> Path: f32 GGUF quantized by llama.cpp
    run_llamacpp_bench(quick=False, log=print, shape="500m", dtype="float32")  # -> BenchReport

One module per job:

* :mod:`~hexamer.bench.llamacpp.convert`: find llama.cpp's converter, convert a folder to GGUF (cached);
* :mod:`~hexamer.bench.llamacpp.quantize`: llama.cpp's own quantizer on a converted GGUF (Q8_0, cached);
* :mod:`~hexamer.bench.llamacpp.tokenizer`: the converter's tokenizer shim and ``_convert`` entry;
* :mod:`~hexamer.bench.llamacpp.parity`: the parity gate (:class:`ParityReport`, :data:`TOLERANCES`);
* :mod:`~hexamer.bench.llamacpp.backend`: :class:`LlamaCppBackend`, batched generation and its parity check;
* :mod:`~hexamer.bench.llamacpp.run`: :func:`run_llamacpp_bench`, the ``hexamer bench llamacpp`` driver.

The converter is found in ``llama_cpp_dir=``, ``$HEXAMER_LLAMA_CPP_DIR``, an unpacked sdist under the
hexamer cache (``scripts/build_llamacpp.sh`` puts one there) or a source checkout of the installed
package; the wheel itself does not ship it. See ``docs/llamacpp.md``.
"""

from hexamer.bench.llamacpp.backend import GenerationTimings, LlamaCppBackend, sample_rows
from hexamer.bench.llamacpp.convert import (
    OUTTYPES,
    convert_to_gguf,
    converter_command,
    default_gguf_path,
    find_converter,
    llama_cpp_available,
)
from hexamer.bench.llamacpp.parity import (
    TOLERANCES,
    ParityError,
    ParityReport,
    compare_logits,
    top1_agreement,
    top1_margins,
)
from hexamer.bench.llamacpp.quantize import QUANT_TYPES, check_quant_type, quantize_gguf, quantized_gguf
from hexamer.bench.llamacpp.run import run_llamacpp_bench

__all__ = [
    "OUTTYPES",
    "QUANT_TYPES",
    "TOLERANCES",
    "GenerationTimings",
    "LlamaCppBackend",
    "ParityError",
    "ParityReport",
    "check_quant_type",
    "compare_logits",
    "convert_to_gguf",
    "converter_command",
    "default_gguf_path",
    "find_converter",
    "llama_cpp_available",
    "quantize_gguf",
    "quantized_gguf",
    "run_llamacpp_bench",
    "sample_rows",
    "top1_agreement",
    "top1_margins",
]
