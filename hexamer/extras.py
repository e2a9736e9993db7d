"""Optional packages and the install hint a missing one gets.

hexamer runs from a source checkout on a node that has only torch, numpy, tokenizers, safetensors,
pyarrow, typer and rich (a cluster image with its own CUDA torch). Everything else is imported
inside the function that needs it; when it is absent the command line turns the
``ModuleNotFoundError`` into one ``error:`` line naming what to install (:func:`install_hint`),
instead of a traceback. A leaf: it imports nothing from hexamer.
"""

from __future__ import annotations

__all__ = ["EXTRAS", "Extra", "install_hint"]

from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    """What a missing module is for and the pip requirements that bring it back."""

    purpose: str
    requirements: tuple[str, ...]
    extra: str | None = None  # the hexamer extra that lists it, where one does


#: Top-level module name -> what it is for. The requirements match ``pyproject.toml``
#: (tests/test_extras.py keeps the two in step).
EXTRAS: dict[str, Extra] = {
    "pysam": Extra("FASTA/FASTQ/VCF/BCF reading and BGZF/tabix output", ("pysam>=0.22",)),
    "fastapi": Extra("hexamer serve", ("fastapi>=0.110", "uvicorn>=0.29", "prometheus-client>=0.20")),
    "starlette": Extra("hexamer serve", ("fastapi>=0.110", "uvicorn>=0.29", "prometheus-client>=0.20")),
    "uvicorn": Extra("hexamer serve", ("uvicorn>=0.29",)),
    "prometheus_client": Extra("hexamer serve's /metrics", ("prometheus-client>=0.20",)),
    "httpx": Extra("remote models and hexamer bench serve", ("httpx>=0.27",)),
    "huggingface_hub": Extra(
        "downloading a hub id (a local folder needs nothing)", ("huggingface-hub>=0.24",)
    ),
    "transformers": Extra("the transformers peer", ("transformers>=4.56",), "hf"),
    "pyBigWig": Extra("bigWig output of hexamer track", ("pyBigWig>=0.3.22",), "tracks"),
    "ray": Extra("--ray scale-out", ("ray>=2.40",), "ray"),
    "matplotlib": Extra("plots and report figures", ("matplotlib>=3.8",), "plots"),
    "sklearn": Extra("ROC/PR metrics and the k-mer baseline", ("scikit-learn>=1.4",), "plots"),
    "llama_cpp": Extra("the llama.cpp peer", ("llama-cpp-python==0.3.36",), "bench"),
}


def install_hint(exc: BaseException) -> str | None:
    """The one-line hint for ``exc`` when it is a missing optional package, else ``None`` (a real
    bug, or a missing core package such as torch, keeps its traceback)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    packages = " ".join(f"'{r}'" for r in extra.requirements)
    also = f" (or the extra: pip install 'hexamer[{extra.extra}]')" if extra.extra else ""
    return f"{extra.purpose} needs the {top} package, which is not installed: pip install {packages}{also}"
