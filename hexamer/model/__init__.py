"""Carbon / Llama model: config parsing, RoPE, the PyTorch decoder, its KV cache and the loader.

Import cost: pulls in torch (unlike ``hexamer.tokenizer``).
"""

from hexamer.model.batch import PaddedRows, pad_rows
from hexamer.model.checkpoint import resolve_dtype
from hexamer.model.config import ModelConfig, RopeConfig
from hexamer.model.kv_cache import KVCache
from hexamer.model.llama import LlamaModel, ModelOutput, VocabRows, positions_from_mask
from hexamer.model.load import load_model
from hexamer.model.rope import apply_rope, rope_cos_sin, rope_frequencies

__all__ = [
    "KVCache",
    "LlamaModel",
    "ModelConfig",
    "ModelOutput",
    "PaddedRows",
    "RopeConfig",
    "VocabRows",
    "apply_rope",
    "load_model",
    "pad_rows",
    "positions_from_mask",
    "resolve_dtype",
    "rope_cos_sin",
    "rope_frequencies",
]
