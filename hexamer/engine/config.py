"""Every option of the generation engine, in one frozen value built once at the edge.

    config = EngineConfig(max_batch_size=32, kv_cache_bytes=8 * 2**30)
    m = Carbon.from_pretrained("path/to/Carbon-3B", engine=config)
    server_config = config.replace(max_batch_size=64)       # a derived config; ``config`` is unchanged

The CLI, :class:`~hexamer.carbon.Carbon` and the server build one, and the engine's parts (cache
manager, scheduler, runner) read their options from it, so a default is written only here and a
bad value is refused, naming the field, before a model is loaded or a cache allocated.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, fields
from typing import Any

#: Most cache rows (sequences decoded together) an engine takes; far above any useful batch, low
#: enough that a typo (``10**9``) is refused before the cache is sized from it.
MAX_BATCH_SIZE = 2**16
#: Most tokens any per-sequence or per-step count may be (2**31 - 1: torch's int32 positions).
MAX_TOKENS = 2**31 - 1


@dataclass(frozen=True)
class EngineConfig:
    """How the engine batches, caches and runs the model (a table of the fields: docs/engine.md).

    max_batch_size: sequences decoded together, i.e. KV-cache rows (the cache is sized to the work,
        at most this many rows).
    max_model_len: tokens per sequence, prompt included (None: the model's context; a larger value
        is capped at the context).
    kv_cache_bytes: memory budget of the KV cache; fewer rows when the rows do not fit (None: no
        budget but the device's free memory).
    prefill_token_budget: prompt tokens admitted into one prefill step (a longer lone prompt is
        still admitted alone).
    prefill_chunk_tokens: most padded prompt tokens per prefill forward (None: 1,024 on CPU, which
        keeps activations in cache; the whole step in one forward on GPU). Outputs do not depend on it.
    dna_only_logits: compute only the ``</dna>``, ``<oov>`` and 6-mer rows of the LM head while
        decoding DNA (outputs identical to full logits).
    static_decode: attend over the whole preallocated cache through a validity mask, one fixed
        graph per batch size (None: on for CUDA, off on CPU).
    compile_decode: ``torch.compile`` the static decode step (CUDA graphs on GPU); implies
        ``static_decode``. On CPU it also keeps the dense linear layers (Inductor wants them).
    prefix_caching: store the full 16-token blocks of prompts in the KV cache by their tokens, so a
        later prompt starting with the same tokens computes only the rest (docs/engine.md).
    """

    max_batch_size: int = 16
    max_model_len: int | None = None
    kv_cache_bytes: int | None = None
    prefill_token_budget: int = 8192
    prefill_chunk_tokens: int | None = None
    dna_only_logits: bool = True
    static_decode: bool | None = None
    compile_decode: bool = False
    prefix_caching: bool = True

    def __post_init__(self) -> None:
        _check_int("max_batch_size", self.max_batch_size, 1, MAX_BATCH_SIZE)
        _check_int("max_model_len", self.max_model_len, 1, MAX_TOKENS, optional=True)
        _check_int("kv_cache_bytes", self.kv_cache_bytes, 1, 2**62, optional=True)
        _check_int("prefill_token_budget", self.prefill_token_budget, 1, MAX_TOKENS)
        _check_int("prefill_chunk_tokens", self.prefill_chunk_tokens, 1, MAX_TOKENS, optional=True)
        _check_bool("dna_only_logits", self.dna_only_logits)
        _check_bool("static_decode", self.static_decode, optional=True)
        _check_bool("compile_decode", self.compile_decode)
        _check_bool("prefix_caching", self.prefix_caching)

    @classmethod
    def from_options(cls, base: EngineConfig | None = None, **options: Any) -> EngineConfig:
        """``base`` (default: the defaults) with ``options`` as fields; an unknown name is a
        ``TypeError`` naming it and the known ones (what ``Carbon(..., max_batch_size=4)`` calls)."""
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"unknown engine option(s): {', '.join(unknown)} (known: {', '.join(known)})")
        if base is None:
            return cls(**options)
        return base.replace(**options) if options else base

    def replace(self, **changes: Any) -> EngineConfig:
        """A copy with ``changes``, checked like a new one (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, int | bool | None]:
        """The fields as a JSON-ready dict (the server's start-up log line)."""
        return dataclasses.asdict(self)


def _check_int(name: str, value: object, low: int, high: int, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        kind = "an integer or None" if optional else "an integer"
        raise ValueError(f"engine option {name} must be {kind}, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"engine option {name} must lie in [{low:,}, {high:,}], got {value:,}")


def _check_bool(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, bool):
        kind = "True, False or None" if optional else "True or False"
        raise ValueError(f"engine option {name} must be {kind}, got {value!r}")
