"""RoPE scaling settings shared by the model parity tests (transformers ``rope_parameters`` form),
sized for the small test models (original context 64 / 32 positions)."""

from __future__ import annotations

from typing import Any

#: YaRN x4 over an original context of 64 positions.
YARN: dict[str, Any] = {
    "rope_type": "yarn",
    "factor": 4.0,
    "original_max_position_embeddings": 64,
    "rope_theta": 10000.0,
}
#: Llama 3 frequency scaling (x8) over an original context of 32 positions.
LLAMA3: dict[str, Any] = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
    "rope_theta": 500000.0,
}
