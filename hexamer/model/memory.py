"""Memory estimates made before anything is allocated: what a config's weights and a KV cache
need, and what the machine has free, so an absurd ``config.json`` or ``--max-model-len`` is
refused with the estimate instead of swapping for minutes or dying in the allocator."""

from __future__ import annotations

import os

import torch

from hexamer.model.config import ModelConfig

__all__ = [
    "NotEnoughMemory",
    "available_memory_bytes",
    "check_fits",
    "format_bytes",
    "parameter_count",
]


class NotEnoughMemory(ValueError):
    """What was asked for does not fit the memory free on the device (a ``ValueError``: it is the
    input's fault, and every command reports it as a clear error)."""


def parameter_count(config: ModelConfig) -> int:
    """Parameters of the Llama decoder ``config`` describes (embeddings, layers, final norm, head)."""
    h, f = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    attention = h * q + 2 * h * kv + q * h
    if config.attention_bias:
        attention += q + 2 * kv + h
    mlp = 3 * h * f + ((2 * f + h) if config.mlp_bias else 0)
    layer = attention + mlp + 2 * h
    head = 0 if config.tie_word_embeddings else config.vocab_size * h
    return config.vocab_size * h + config.num_hidden_layers * layer + h + head


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory_bytes(device: torch.device | str = "cpu") -> int | None:
    """Free memory on ``device``: ``MemAvailable`` for the CPU (Linux; ``sysconf`` elsewhere),
    the driver's free bytes for CUDA; ``None`` when it cannot be told."""
    device = torch.device(device)
    if device.type == "cuda":
        try:
            free, _ = torch.cuda.mem_get_info(device)
        except (RuntimeError, AssertionError):
            return None
        return int(free)
    if device.type != "cpu":
        return None
    found = _meminfo_available()
    if found is not None:
        return found
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(n: float) -> str:
    """``1.5 GiB``-style sizes (up to EiB; larger values in EiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024:
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} EiB"


def check_fits(need: int, device: torch.device | str, what: str, hint: str = "") -> None:
    """Refuse (:class:`NotEnoughMemory`) ``need`` bytes on ``device`` when more than is free there."""
    free = available_memory_bytes(device)
    if free is not None and need > free:
        raise NotEnoughMemory(
            f"{what} needs {format_bytes(need)}, more than the {format_bytes(free)} free on "
            f"{torch.device(device)}{'; ' + hint if hint else ''}"
        )
