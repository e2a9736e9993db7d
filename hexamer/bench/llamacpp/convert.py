"""GGUF conversion of a Carbon folder with llama.cpp's own ``convert_hf_to_gguf.py``.

The converter is found in ``llama_cpp_dir=``, ``$HEXAMER_LLAMA_CPP_DIR``, an unpacked sdist under the
hexamer cache (``scripts/build_llamacpp.sh`` puts one there) or a source checkout of the installed
package; the wheel itself does not ship it. It runs in a subprocess, through this package's
``_convert`` entry (:mod:`hexamer.bench.llamacpp.tokenizer`), and its output is cached next to the folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from hexamer.cache import cache_root

#: GGUF tensor type per hexamer dtype name (the converter's ``--outtype``).
OUTTYPES: dict[str, str] = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
#: llama.cpp KV-cache element types (``enum ggml_type``).
_GGML_TYPES: dict[str, int] = {"f32": 0, "f16": 1, "bf16": 30}
_INSTALL_HINT = "pip install 'hexamer[bench]' (builds llama.cpp from source, ~10 min; see docs/llamacpp.md)"
_CONVERTER = "convert_hf_to_gguf.py"


def llama_cpp_available() -> tuple[bool, str]:
    """Whether ``llama_cpp`` (llama-cpp-python) imports; the reason when it does not."""
    if importlib.util.find_spec("llama_cpp") is None:
        return False, f"llama-cpp-python is not installed: {_INSTALL_HINT}"
    try:
        import llama_cpp  # noqa: F401
    except Exception as exc:  # a broken build raises OSError/RuntimeError while loading libllama
        return False, f"llama-cpp-python is installed but does not load ({type(exc).__name__}: {exc})"
    return True, ""


def _converter_in(directory: Path) -> Path | None:
    for candidate in (directory, directory / "vendor" / "llama.cpp"):
        if (candidate / _CONVERTER).is_file() and (candidate / "gguf-py" / "gguf").is_dir():
            return candidate / _CONVERTER
    return None


def find_converter(llama_cpp_dir: str | os.PathLike[str] | None = None) -> Path:
    """``convert_hf_to_gguf.py`` of a llama.cpp source tree that matches the installed library.

    Looked up in ``llama_cpp_dir``, ``$HEXAMER_LLAMA_CPP_DIR``, ``<hexamer cache>/llama_cpp_python-*``
    (an unpacked sdist) and next to the imported package (source checkouts). A directory may be a
    llama.cpp checkout or an unpacked llama-cpp-python sdist (its ``vendor/llama.cpp`` is used).
    """
    tried: list[str] = []
    explicit = llama_cpp_dir or os.environ.get("HEXAMER_LLAMA_CPP_DIR")
    candidates: list[Path] = [Path(explicit)] if explicit else []
    if not explicit:
        candidates += sorted(cache_root().glob("llama_cpp_python-*"), reverse=True)
        spec = importlib.util.find_spec("llama_cpp")
        if spec is not None and spec.origin:
            candidates.append(Path(spec.origin).resolve().parent.parent)
    for directory in candidates:
        found = _converter_in(directory)
        if found is not None:
            return found
        tried.append(str(directory))
    where = f" (looked in: {', '.join(tried)})" if tried else ""
    raise FileNotFoundError(
        f"llama.cpp's {_CONVERTER} was not found{where}. The llama-cpp-python wheel does not ship it: "
        "unpack the llama-cpp-python==0.3.36 sdist (scripts/build_llamacpp.sh does) and set "
        "HEXAMER_LLAMA_CPP_DIR to it or to its vendor/llama.cpp"
    )


def default_gguf_path(folder: str | os.PathLike[str], outtype: str) -> Path:
    """Where a converted folder is cached: a sibling ``<folder>.<outtype>.gguf``, or under the
    hexamer cache (``gguf/<folder>-<path hash>/``) when the folder lies inside the installed
    package (the demo model) or its parent is not writable."""
    folder = Path(folder).resolve()
    name = f"{folder.name}.{outtype}.gguf"
    package = Path(__file__).resolve().parents[2]
    if package in folder.parents or not os.access(folder.parent, os.W_OK):
        digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
        return cache_root() / "gguf" / f"{folder.name}-{digest}" / name
    return folder.parent / name


def converter_command(
    folder: str | os.PathLike[str], out_path: str | os.PathLike[str], outtype: str, converter: Path
) -> list[str]:
    """The command that converts ``folder``: this module's ``_convert`` entry, which runs the
    converter with hexamer's tokenizer in place of the folder's remote code (see :func:`_convert_main`)."""
    if outtype not in _GGML_TYPES:
        raise ValueError(f"outtype must be one of {sorted(_GGML_TYPES)}, got {outtype!r}")
    return [
        sys.executable,
        "-m",
        "hexamer.bench.llamacpp",
        "_convert",
        str(converter),
        str(folder),
        "--outfile",
        str(out_path),
        "--outtype",
        outtype,
    ]


def _is_fresh(out: Path, folder: Path) -> bool:
    if not out.is_file():
        return False
    inputs = [p for p in folder.iterdir() if p.suffix in (".json", ".safetensors")]
    return all(p.stat().st_mtime <= out.stat().st_mtime for p in inputs)


def convert_to_gguf(
    folder: str | os.PathLike[str],
    out_path: str | os.PathLike[str] | None = None,
    outtype: str = "f32",
    *,
    llama_cpp_dir: str | os.PathLike[str] | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> Path:
    """Convert a Carbon-format folder to GGUF with llama.cpp's converter; reuse a fresh earlier result.

    Runs in a subprocess (the converter holds the whole model in memory) and writes atomically, so
    an interrupted conversion never leaves a file that later runs would take for a finished one.
    """
    folder = Path(folder).resolve()
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"not a model folder (no config.json): {folder}")
    from hexamer.model.quant import refuse_int8_folder

    refuse_int8_folder(folder, "llama.cpp's GGUF converter")
    out = Path(out_path) if out_path is not None else default_gguf_path(folder, outtype)
    if _is_fresh(out, folder):
        return out
    converter = find_converter(llama_cpp_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    log(f"converting {folder.name} to GGUF ({outtype}) with {converter} ...")
    proc = subprocess.run(
        converter_command(folder, tmp, outtype, converter), capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"GGUF conversion of {folder} failed (exit {proc.returncode}):\n{tail}")
    tmp.replace(out)
    return out
