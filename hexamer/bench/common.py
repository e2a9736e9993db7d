"""Helpers every benchmark shares: the random-weight model folder of a shape, a timed region
without the cyclic garbage collector, the settings each VEP recipe reads, and the logits processor
that keeps a transformers peer on the 6-mer block. A leaf: it imports no other ``hexamer.bench`` module, so any
benchmark can use it without import cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def bench_model_folder(shape: str, cache_root: Path, dtype: str = "float32") -> Path:
    """A random-weight folder with a published Carbon shape and the real vocabulary, built once."""
    from hexamer.synthetic import build_carbon_folder_once

    return build_carbon_folder_once(
        cache_root / f"bench-{shape}-qwen3-{dtype}",
        shape=shape,
        bpe="qwen3",
        dtype=dtype,
        shards=1 if shape in ("tiny", "500m") else 4,
    )


def recipe_options(recipe: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that ``recipe`` reads (:data:`hexamer.vep.settings.RECIPE_FIELDS`),
    in their order."""
    from hexamer.vep.settings import RECIPE_FIELDS

    return {k: v for k, v in options.items() if k in RECIPE_FIELDS[recipe]}


@contextmanager
def gc_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector out of a timed region (as ``timeit`` does); callers collect
    once before a series of runs instead of before each (a full collection can take ~0.5 s)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def kmer_only_processor(start: int, stop: int) -> Any:
    """A ``transformers.LogitsProcessor`` keeping only the logit columns ``[start, stop)`` (the 6-mer
    block; -inf elsewhere), so a transformers peer generates DNA like hexamer's token level
    (unrestricted, a random-weight model would wander into text)."""
    import torch
    import transformers

    class KmerOnly(transformers.LogitsProcessor):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
            out = torch.full_like(scores, -torch.inf)
            out[:, start:stop] = scores[:, start:stop]
            return out

    return KmerOnly()


class BenchOptionError(ValueError):
    """A benchmark's options are wrong (the CLI turns this into a usage error naming the option)."""
