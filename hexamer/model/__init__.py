"""Carbon / Llama model: config parsing, RoPE, the PyTorch decoder, its KV cache and the loader.

Import cost: pulls in torch (unlike ``hexamer.tokenizer``).
"""

from hexamer.model.config import ModelConfig, RopeConfig
from hexamer.model.llama import KVCache, LlamaModel, ModelOutput, VocabRows, positions_from_mask
from hexamer.model.loading import load_model, resolve_dtype
from hexamer.model.rope import apply_rope, rope_cos_sin, rope_frequencies

__all__ = [
    "KVCache",
    "LlamaModel",
    "ModelConfig",
    "ModelOutput",
    "RopeConfig",
    "VocabRows",
    "apply_rope",
    "load_model",
    "positions_from_mask",
    "resolve_dtype",
    "rope_cos_sin",
    "rope_frequencies",
]
