"""llama.cpp's own quantizer (``llama_model_quantize``, what its ``llama-quantize`` tool runs) on a
GGUF that hexamer converted, so that ``hexamer bench quant`` can time and score llama.cpp's Q8_0,
Q4_K_M and Q4_0 on exactly the weights hexamer's int8 and int4 modes quantize, without a llama.cpp
command-line build.

The result is cached next to the folder as ``<folder>.<type>.gguf``, written atomically and reused
while newer than the float32 GGUF it came from.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

from hexamer.bench.llamacpp.convert import convert_to_gguf, default_gguf_path, llama_cpp_available

#: llama.cpp file types hexamer makes (name -> ``enum llama_ftype`` member of ``llama_cpp``).
QUANT_TYPES: dict[str, str] = {
    "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
    "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
    "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0",
}


def check_quant_type(qtype: str) -> str:
    """``qtype`` when hexamer can make it, else a ``ValueError`` naming the choices."""
    if qtype not in QUANT_TYPES:
        raise ValueError(f"GGUF quantization type must be one of {sorted(QUANT_TYPES)}, got {qtype!r}")
    return qtype


def quantize_gguf(
    src: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    qtype: str = "q8_0",
    *,
    n_threads: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """Quantize the float GGUF ``src`` to ``qtype`` with llama.cpp's ``llama_model_quantize``.

    Reuses ``out_path`` while it is newer than ``src``; otherwise writes a temporary sibling and
    renames it, so an interrupted run never leaves a file that a later run would take as finished.
    ``n_threads`` 0 lets llama.cpp choose.
    """
    check_quant_type(qtype)
    if n_threads < 0:
        raise ValueError(f"n_threads must be >= 0, got {n_threads}")
    src, out = Path(src), Path(out_path)
    if not src.is_file():
        raise FileNotFoundError(f"GGUF to quantize not found: {src}")
    if out.is_file() and out.stat().st_mtime >= src.stat().st_mtime:
        return out
    ok, why = llama_cpp_available()
    if not ok:
        raise RuntimeError(why)
    import llama_cpp

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, QUANT_TYPES[qtype])
    params.nthread = n_threads
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    log(f"quantizing {src.name} to {qtype} with llama.cpp's llama_model_quantize ...")
    try:
        status = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
        if status != 0 or not tmp.is_file():
            raise RuntimeError(f"llama_model_quantize({src} -> {qtype}) failed with status {status}")
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def quantized_gguf(
    folder: str | os.PathLike[str],
    qtype: str = "q8_0",
    *,
    n_threads: int = 0,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """``folder`` as a ``qtype`` GGUF: converted to f32 with llama.cpp's converter, then quantized
    by llama.cpp (both cached next to the folder, see :func:`convert_to_gguf`)."""
    check_quant_type(qtype)
    f32 = convert_to_gguf(folder, outtype="f32", log=log)
    return quantize_gguf(f32, default_gguf_path(folder, qtype), qtype, n_threads=n_threads, log=log)
