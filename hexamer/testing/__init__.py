"""Public test helpers: build complete Carbon-format model folders with no download."""

from hexamer.testing.folders import (
    SHAPES,
    ModelShape,
    build_carbon_folder,
    build_carbon_folder_once,
    build_overflowing_folder,
    llama_config,
    poison_weights,
    qwen3_bpe_json,
    random_llama_weights,
    save_safetensors,
    tiny_bpe_json,
    write_tokenizer_files,
)
from hexamer.testing.qwen import CARBON_DNA_START_ID, QWEN3_ADDED_TOKENS, QWEN3_BPE_SIZE

__all__ = [
    "CARBON_DNA_START_ID",
    "QWEN3_ADDED_TOKENS",
    "QWEN3_BPE_SIZE",
    "SHAPES",
    "ModelShape",
    "build_carbon_folder",
    "build_carbon_folder_once",
    "build_overflowing_folder",
    "llama_config",
    "poison_weights",
    "qwen3_bpe_json",
    "random_llama_weights",
    "save_safetensors",
    "tiny_bpe_json",
    "write_tokenizer_files",
]
